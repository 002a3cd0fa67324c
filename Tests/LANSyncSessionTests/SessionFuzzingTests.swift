import Foundation
import LANSyncCore
import LANSyncSession
import LANSyncTestSupport
import Testing

/// The session fuzzer's scripts, replayed in the test command: a fixed set of seeded random
/// scripts (scripts/fuzz explores further with libFuzzer), and the three one-message crashes
/// written as scripts.
@Suite struct SessionFuzzingTests {
    /// Seeded scripts run without a crash or a broken invariant, and do reach merges, sends and
    /// endings (a fuzzer that never got past the decoders would prove nothing).
    @Test func seededScriptsRunCleanAndReachTheSessionsDepths() async {
        var generator = SplitMix64(seed: 0x1A5_5EED)
        var merges = 0
        var changingMerges = 0
        var sent = 0
        var sessions = 0
        var endings = Set<String>()
        for _ in 0..<600 {
            let length = Int(generator.next() % 160) + 4
            let script = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let report = await SessionFuzzing.run(script)
            merges += report.merges
            changingMerges += report.changingMerges
            sent += report.rowsSent
            sessions += report.sessions
            for ending in report.endings { endings.insert(Self.kind(ending)) }
        }
        // Version 4 refuses most fuzzed deltas (unsigned, forged) whole; the script signs some
        // ranges as their writer would, and those merge.
        #expect(merges > 30, "merges: \(merges)")
        #expect(changingMerges > 5, "merges that changed the replica: \(changingMerges)")
        #expect(sent > 200, "rows sent: \(sent)")
        #expect(sessions > 600, "sessions: \(sessions)")
        #expect(endings == ["goodbye", "malformed", "clock skew", "keepalive"], "\(endings)")
    }

    /// The three crashes, as scripts: receive (op 0) a state (kind 0) naming two replicas at
    /// 2^64 − 1 and 1; receive a delta (kind 1) covering (r, 0, 2^63] with one row at counter 1.
    /// Each must end the session as malformed, and the replica stays as it was.
    @Test func theFormerCrashMessagesEndTheSessionAsMalformed() async {
        let edge = { (value: UInt64) -> UInt8 in UInt8(SessionFuzzingEdges.index(of: value)) }
        let state: [UInt8] = [0, 0, 2, 1, edge(.max), 2, edge(1), edge(0)]
        let delta: [UInt8] = [
            0, 1, 1, 1, edge(0), edge(1 << 63), 1, 0, 0, 1, edge(1), edge(1_700_000_000_000 << 16),
            edge(1_700_000_000_000), 0, 0,
        ]
        for script in [state, delta] {
            let report = await SessionFuzzing.run(script)
            guard case .malformed(let reason)? = report.endings.first else {
                Issue.record("expected a malformed ending, got \(report.endings)")
                continue
            }
            #expect(reason.contains("outside"), "\(reason)")
            #expect(report.merges == 0)
        }
    }
}

extension SessionFuzzingTests {
    /// The committed seeds of scripts/fuzz's session target replay cleanly here too.
    @Test func corpusReplaysCleanly() async throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/session").standardizedFileURL
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(files.count >= 4)
        for file in files {
            _ = await SessionFuzzing.run([UInt8](try Data(contentsOf: corpus.appendingPathComponent(file))))
        }
    }

    static func kind(_ ending: SessionEnd) -> String {
        switch ending {
        case .peerSaidGoodbye: return "goodbye"
        case .malformed: return "malformed"
        case .clockSkew: return "clock skew"
        case .keepaliveExpired: return "keepalive"
        case .peerClosed, .shuttingDown, .replaced: return "other"
        }
    }
}

/// Where each edge value sits in the fuzzer's table, so a script can name it.
enum SessionFuzzingEdges {
    static func index(of value: UInt64) -> Int { SessionFuzzing.edgeValues.firstIndex(of: value)! }
}
