import Foundation

/// Runs group simulations by seed, and shrinks the schedule of one that fails.
package enum Simulator {
    /// One seed's run.
    package struct SeedRun: Sendable {
        package let seed: UInt64
        package let schedule: Schedule
        /// The network's seed it ran with: with the schedule (or a shrunk one), it replays the run.
        package let networkSeed: UInt64
        package let outcome: GroupSimulation.Outcome
    }

    /// How many actions a seed's schedule has.
    package static let defaultLength = 60

    /// Where the runs keep their nodes' files: memory-backed when the machine has it.
    package static var scratch: String {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        return base + "/lansync-simulation-\(getpid())"
    }

    /// The schedule and network seed that `seed` stands for.
    package static func plan(
        seed: UInt64,
        length: Int = defaultLength,
        byzantine: Bool
    ) -> (Schedule, networkSeed: UInt64) {
        var random = SeededRandom(seed: seed ^ (byzantine ? 0xB1_2A_B1_2A : 0))
        let schedule = Schedule.random(&random, length: length, byzantine: byzantine)
        return (schedule, random.next())
    }

    /// Runs `seed`.
    package static func run(seed: UInt64, length: Int = defaultLength, byzantine: Bool) async -> SeedRun {
        let (schedule, networkSeed) = plan(seed: seed, length: length, byzantine: byzantine)
        let outcome = await GroupSimulation(
            schedule: schedule,
            networkSeed: networkSeed,
            root: scratch + "/\(UUID().uuidString)"
        ).run()
        return SeedRun(seed: seed, schedule: schedule, networkSeed: networkSeed, outcome: outcome)
    }

    /// The smallest schedule found that still fails (by dropping runs of actions, halving the run
    /// length down to one), within `budget` runs.
    /// It runs with the failing run's network seed (planning the seed again from the schedule's
    /// length drew another one: a schedule holds its opening connects besides its actions).
    package static func shrink(_ failing: SeedRun, budget: Int = 150) async -> Schedule {
        let networkSeed = failing.networkSeed
        var schedule = failing.schedule
        var runs = 0
        var chunk = max(1, schedule.actions.count / 2)
        while chunk >= 1, runs < budget {
            var start = 0
            var removedAny = false
            while start < schedule.actions.count, runs < budget {
                var candidate = schedule
                candidate.actions.removeSubrange(start..<min(start + chunk, candidate.actions.count))
                runs += 1
                let outcome = await GroupSimulation(
                    schedule: candidate,
                    networkSeed: networkSeed,
                    root: scratch + "/\(UUID().uuidString)"
                ).run()
                if outcome.failure != nil {
                    schedule = candidate
                    removedAny = true
                } else {
                    start += chunk
                }
            }
            if !removedAny { chunk /= 2 }
        }
        return schedule
    }
}
