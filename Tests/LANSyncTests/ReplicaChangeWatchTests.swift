import Foundation
import LANSync
import Synchronization
import Testing

/// The watch the agent and a node an app observes share (`ReplicaChangeWatch`): a commit by
/// another process (here a second node on the same files, with its own connections) calls back,
/// and nothing does after `stop`.
@Suite struct ReplicaChangeWatchTests {
    final class Count: Sendable {
        let value = Mutex(0)
        func add() { value.withLock { $0 += 1 } }
        var now: Int { value.withLock { $0 } }
    }

    @Test func aCommitElsewhereCallsBackAndStopEndsIt() async throws {
        let temporary = try TemporaryNode()
        let other = try LANSyncNode.open(at: temporary.node.dataDirectory)
        let calls = Count()
        let watch = ReplicaChangeWatch(store: temporary.node.store, dataDirectory: temporary.node.dataDirectory) {
            calls.add()
        }
        #expect(watch.usesInotify)
        _ = try await other.append(to: "taps", payload: "{}")
        let deadline = ContinuousClock.now + .seconds(30)
        while calls.now == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(calls.now >= 1, "another node's commit was seen")
        watch.stop()
        let seen = calls.now
        _ = try await other.append(to: "taps", payload: "{}")
        try await Task.sleep(for: .milliseconds(300))
        #expect(calls.now == seen, "nothing after stop")
    }
}
