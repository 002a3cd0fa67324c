import ArgumentParser
import Foundation
import LANSyncSimulation

/// Runs group simulations: many seeds, honest and Byzantine, and reports what they found.
@main
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lansync-simulate",
        abstract: "Simulate whole LANSync groups on a simulated network and check that they converge.",
        discussion: """
            Each seed is one run: 3 to 7 real nodes (their SQLite replicas in memory-backed files), \
            the real sync protocol and signatures, and a network that delays, drops and partitions, \
            all on a simulated clock. Users append, set preferences and edit app tables; devices go \
            away, come back, are killed, reinstalled, removed and join late. Then the network heals \
            and the checker asserts that the group converges and keeps every acknowledged write.

            A failing seed prints its schedule, shrunk, and the devices that diverged, with the \
            replicas each lacks and why; `--seed N` replays it exactly, and \
            LANSYNC_SIMULATE_TRACE=1 prints every merge, batch sent, reply, look at open claims \
            and refused connection as it runs.

            Examples:
              lansync-simulate --seeds 1000
              lansync-simulate --seeds 1000 --byzantine
              lansync-simulate --seeds 100000 --minutes 60
              lansync-simulate --seed 4242 --byzantine --verbose
            """
    )

    @Option(help: "How many seeds to run, from --first.")
    var seeds = 100

    @Option(help: "The first seed.")
    var first: UInt64 = 1

    @Option(help: "Run only this seed (and show its schedule with --verbose).")
    var seed: UInt64?

    @Flag(help: "One member of each group sends hostile changes; the honest ones must still converge.")
    var byzantine = false

    @Option(help: "How many actions each schedule has.")
    var length = Simulator.defaultLength

    @Option(help: "Stop starting seeds after this many minutes (the summary says how many ran).")
    var minutes: Double?

    @Flag(help: "Print each seed's schedule.")
    var verbose = false

    @Flag(help: "Do not shrink a failing schedule.")
    var noShrink = false

    func run() async throws {
        try Self.hashDeterministically()
        let range = seed.map { $0...$0 } ?? first...(first + UInt64(max(1, seeds)) - 1)
        let started = ContinuousClock.now
        var (runs, events, messages, failures, refused, claims, hostile, cascaded) = (0, 0, 0, 0, 0, 0, 0, 0)
        for current in range {
            if let minutes, ContinuousClock.now - started > .seconds(minutes * 60) { break }
            let run = await Simulator.run(seed: current, length: length, byzantine: byzantine)
            runs += 1
            events += run.outcome.events
            messages += run.outcome.messages
            refused += run.outcome.refusedDeltas
            claims += run.outcome.claimsOpened
            hostile += run.outcome.hostileSends
            cascaded += run.outcome.cascadedStrokes
            if verbose { print("seed \(current) (network seed \(run.networkSeed)):\n\(run.schedule)") }
            if runs % 500 == 0 {
                // A long run that is stopped still says how far it got.
                print(
                    "\(runs) seeds\(byzantine ? " (byzantine)" : ""), \(failures) failed so far, up to seed \(current)"
                )
                fflush(nil)
            }
            guard let failure = run.outcome.failure else { continue }
            failures += 1
            print("FAILED seed \(current)\(byzantine ? " (byzantine)" : ""): \(failure)")
            if !noShrink {
                let shrunk = await Simulator.shrink(run)
                // The network seed with the shrunk schedule replays it in a test (`GroupSimulation`).
                print(
                    "shrunk schedule (\(shrunk.actions.count) of \(run.schedule.actions.count) actions, network seed \(run.networkSeed)):\n\(shrunk)"
                )
            }
            print("replay: lansync-simulate --seed \(current)\(byzantine ? " --byzantine" : "") --length \(length)")
            // Into a log file too: a failure shows while a long run goes on.
            fflush(nil)
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            String(
                format: "%d seeds%@: %d failed; %d simulated events, %d messages, %d hostile sends, %d deltas refused, "
                    + "%d looks at open claims, %d strokes gone with their item; %.1f s, %.1f seeds/s",
                runs,
                byzantine ? " (byzantine)" : "",
                failures,
                events,
                messages,
                hostile,
                refused,
                claims,
                cascaded,
                seconds,
                Double(runs) / max(seconds, 0.001)
            )
        )
        if failures > 0 { throw ExitCode(1) }
    }

    /// Runs this process again with Swift's per-process hash seed fixed, unless it is already:
    /// the order of a dictionary's iteration depends on the seed, a node's choices follow that
    /// order in places, and a seed must replay in another process exactly as it failed.
    static func hashDeterministically() throws {
        let variable = "SWIFT_DETERMINISTIC_HASHING"
        guard ProcessInfo.processInfo.environment[variable] == nil else { return }
        setenv(variable, "1", 1)
        let arguments = CommandLine.arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", arguments)
        throw ValidationError(
            "could not run again with \(variable)=1 (\(String(cString: strerror(errno)))); set it and run again"
        )
    }
}
