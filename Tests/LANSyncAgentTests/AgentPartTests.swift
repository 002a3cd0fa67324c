import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import LANSyncAgent

/// The agent's parts as services: each moves through explicit states, stops in reverse order of
/// starting, and a part that fails says why and ends the group.
@Suite struct AgentPartTests {
    /// Records the order in which parts stop.
    final class StopOrder: Sendable {
        private let names = Mutex<[String]>([])
        func stopped(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    static func part(_ name: String, _ states: AgentPartStates, order: StopOrder) -> AgentPart {
        AgentPart(name: name, states: states) { ready in
            ready()
            try? await gracefulShutdown()
            order.stopped(name)
        }
    }

    /// Polls until `condition` holds. The deadline is long on purpose: the whole suite runs in one
    /// process, and while the CLI tests block the cooperative pool a part can take tens of seconds
    /// to be scheduled (it returns as soon as the condition holds).
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(180)
        while !condition() {
            guard ContinuousClock.now < deadline else { return }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test func partsRunThenStopInReverseOrder() async throws {
        let states = AgentPartStates()
        let order = StopOrder()
        let parts = ["first", "second", "third"].map { Self.part($0, states, order: order) }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: parts.map { .init(service: $0) },
                logger: Logger(label: "test")
            )
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await Self.waitUntil { states.all.count == 3 && states.all.allSatisfy { $0.state == .running } }
            #expect(states.all.map(\.state) == [.running, .running, .running])
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(states.all.map(\.state) == [.stopped, .stopped, .stopped])
        #expect(order.all == ["third", "second", "first"])
    }

    struct BindFailed: Error, CustomStringConvertible {
        var description: String { "address in use" }
    }

    @Test func aFailingPartSaysWhyAndEndsTheGroup() async throws {
        let states = AgentPartStates()
        let order = StopOrder()
        let failing = AgentPart(name: "sync listener", states: states) { _ in throw BindFailed() }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: Self.part("peer directory", states, order: order)), .init(service: failing)],
                logger: Logger(label: "test")
            )
        )
        await #expect(throws: BindFailed.self) { try await group.run() }
        let listener = states.all.first { $0.name == "sync listener" }
        #expect(listener?.state == .failed)
        #expect(listener?.detail == "address in use")
        #expect(states.all.first { $0.name == "peer directory" }?.state == .stopped)
    }
}
