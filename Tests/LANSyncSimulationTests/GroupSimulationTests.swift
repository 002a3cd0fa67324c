import LANSyncSimulation
import Testing

/// The group simulator in the test command: a bounded number of seeds, honest and Byzantine.
/// `scripts/simulate --seeds N` runs many more.
@Suite struct GroupSimulationTests {
    @Test(arguments: [false, true]) func seedsConverge(byzantine: Bool) async {
        for seed in UInt64(1)...12 {
            let run = await Simulator.run(seed: seed, byzantine: byzantine)
            #expect(run.outcome.failure == nil, "seed \(seed)\(byzantine ? " (byzantine)" : ""): \(run.outcome.failure ?? "")\n\(run.schedule)")
        }
    }
}
