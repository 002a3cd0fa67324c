import LANSyncWire
import Testing

@testable import LANSyncAgent

/// The session shell carries out the machine's timer (`SyncProtocol.nextDeadline`): a silent
/// peer gets pings, one per keepalive interval of the agent's own silence and each sent by the
/// sending task, and after three intervals of the peer's silence the agent closes the connection
/// without a goodbye (the peer is unreachable, so there is nobody to tell).
@Suite struct SessionTimerTests {
    @Test func aSilentPeerIsPingedThenDroppedWithoutAGoodbye() async throws {
        let keepalive = Duration.milliseconds(300)
        let agent = try await RunningAgent.start(keepalive: keepalive)
        defer { agent.stop() }
        let started = ContinuousClock.now
        let (messages, elapsed) = try await withThrowingTaskGroup(of: ([WireMessage], Duration)?.self) { race in
            race.addTask {
                try await RawPeer.connect(port: agent.port, group: agent.group) { peer in
                    var messages: [WireMessage] = []
                    // Bounded: an agent that never dropped the peer would ping it for good.
                    while messages.count < 200, let message = try? await peer.receiver.next() {
                        messages.append(message)
                    }
                    return (messages, ContinuousClock.now - started)
                }
            }
            // And an agent that neither pinged nor dropped it would leave it waiting for good.
            race.addTask {
                try await Task.sleep(for: .seconds(120))
                return nil
            }
            defer { race.cancelAll() }
            return try await race.next()! ?? ([], .seconds(120))
        }
        // Whether a ping went before the end depends on how late the timer fires on a busy
        // machine (one that fires after three intervals ends the session at once): pings, if
        // any, count up from 1 (`SyncProtocolTests` checks when they go).
        let pings = messages.compactMap { message -> UInt64? in
            if case .ping(let value) = message { value } else { nil }
        }
        #expect(pings == (pings.isEmpty ? [] : Array(1...UInt64(pings.count))), "pings count up from 1 with none lost")
        #expect(messages.count < 200, "the agent dropped the silent peer")
        #expect(
            !messages.contains { if case .goodbye = $0 { true } else { false } },
            "no goodbye to an unreachable peer"
        )
        #expect(elapsed >= keepalive * 3, "not before three intervals of silence: \(elapsed)")
    }
}
