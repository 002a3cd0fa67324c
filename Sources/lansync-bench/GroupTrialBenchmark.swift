import Foundation
import LANSyncCrypto
import LANSyncWire

/// `--group-trial`: what a responder serving several groups on one listener pays to find the
/// initiator's group (`NoiseKeyTrial`): opening a first handshake message with each group's key,
/// padded to at least 64 trials, beside the one-group responder's opening of the same message
/// with its one key. The counts alternate within each round; medians and ranges of the rounds.
/// The goal (issue 35): at most 2 ms on the responder with 50 groups.
enum GroupTrialBenchmark {
    static func run(scale: Scale) throws {
        let counts = [1, 50, 64, 200]
        let rounds = scale.pick(9, quick: 9, smoke: 3)
        let repeats = scale.pick(50, quick: 50, smoke: 5)
        let prologue = WireProtocol.prologue
        let responder = KeyPair.generate()
        let psks = (0..<counts.max()!).map { _ in SecureBytes(randomCount: 32) }
        var single = [Double]()
        var trials = [[Double]](repeating: [], count: counts.count)
        let clock = ContinuousClock()
        /// A member's first handshake message, as an initiator of the group of `psk` writes it.
        func firstMessage(psk: SecureBytes) throws -> [UInt8] {
            var initiator = NoiseHandshake(
                pattern: .xxpsk0,
                initiator: true,
                prologue: prologue,
                staticKey: KeyPair.generate(),
                psk: psk
            )
            return try initiator.writeMessage(payload: VersionOffer().encoded())
        }
        let groups = counts.map { Array(psks[0..<$0]) }
        for _ in 0..<rounds {
            // The initiator belongs to the last group: every key is tried whichever matches, so
            // its place does not change the time.
            var baseline = Duration.zero
            for _ in 0..<repeats {
                let first = try firstMessage(psk: psks[0])
                let start = clock.now
                var handshake = NoiseHandshake(
                    pattern: .xxpsk0,
                    initiator: false,
                    prologue: prologue,
                    staticKey: responder,
                    psk: psks[0]
                )
                _ = try handshake.readMessage(first)
                baseline += clock.now - start
            }
            single.append(baseline.milliseconds / Double(repeats))
            for (position, keys) in groups.enumerated() {
                var total = Duration.zero
                for _ in 0..<repeats {
                    let first = try firstMessage(psk: keys[keys.count - 1])
                    let start = clock.now
                    let opened = NoiseKeyTrial.respond(
                        to: first,
                        pattern: .xxpsk0,
                        prologue: prologue,
                        staticKey: responder,
                        psks: keys
                    )
                    total += clock.now - start
                    precondition(opened?.index == keys.count - 1, "the initiator's group is found")
                }
                trials[position].append(total.milliseconds / Double(repeats))
            }
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(format: "%.3f ms [%.3f-%.3f]", sorted[sorted.count / 2], sorted[0], sorted[sorted.count - 1])
        }
        print("Handshake message 1 on the responder, \(rounds) rounds of \(repeats), medians [ranges]:")
        print("    one group, its one key (today's responder)       " + summary(single))
        if let fifty = counts.firstIndex(of: 50) {
            GoalRecord.record(
                "handshake on a responder in 50 groups",
                figure: summary(trials[fifty]),
                goal: "≤ 2 ms",
                met: trials[fifty].sorted()[rounds / 2] <= 2
            )
        }
        for (position, count) in counts.enumerated() {
            let goal =
                count == 50
                ? "   (goal <= 2 ms: \(trials[position].sorted()[rounds / 2] <= 2 ? "met" : "NOT met"))" : ""
            print(
                "    \(String(count).padding(toLength: 3, withPad: " ", startingAt: 0)) groups, every key tried (at least 64 trials)   "
                    + summary(trials[position]) + goal
            )
        }
        print("")
        fflush(nil)
    }
}
