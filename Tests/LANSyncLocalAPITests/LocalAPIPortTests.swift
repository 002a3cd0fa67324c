import Foundation
import LANSync
import LANSyncAgent
import LANSyncTestSupport
import Logging
import ServiceLifecycle
import Testing

@testable import LANSyncLocalAPI

/// A second agent on one machine (another data directory) lost its whole API when the default
/// port was taken: neither TCP nor its Unix socket served, and `status` said all was running.
@Suite struct LocalAPIPortTests {
    /// A loopback TCP port held by this test while `body` runs, as another program would hold it.
    static func withTakenPort<T>(_ body: (Int) async throws -> T) async throws -> T {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(socket >= 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                Glibc.bind(socket, address, length) == 0 && listen(socket, 1) == 0
                    && getsockname(socket, address, &length) == 0
            }
        }
        #expect(bound)
        return try await body(Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Runs an agent and its API with `configuration` until both of the API's servers have had
    /// their say (or 120 s pass: the whole test suite runs beside it on two cores), then stops
    /// both; returns the part's last status and the data directory's files.
    static func run(
        _ configure: (inout LocalAPIConfiguration) -> Void
    ) async throws -> (AgentPartStatus?, apiAddress: String?, socket: Bool) {
        let (agent, _, group, root) = try await Self.make(configure)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let running = Task { try await group.run() }
        defer { running.cancel() }
        var part: AgentPartStatus?
        _ = await eventually(within: 120) {
            part = agent.partStatuses.first { $0.name == LocalAPI.partName }
            guard let part, part.state != .starting, let detail = part.detail else { return false }
            // Both servers have had their say: TCP is bound or failed, the socket too.
            return !detail.contains("TCP starting") && (detail.contains("unix") || detail.contains("no Unix socket"))
        }
        let address = try? String(contentsOfFile: root + "/api-address", encoding: .utf8)
        let socket = FileManager.default.fileExists(atPath: root + "/api.sock")
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        return (part, address?.trimmingCharacters(in: .whitespacesAndNewlines), socket)
    }

    /// An agent and its API for a new node, and a service group that runs both; nothing runs
    /// yet. Remove `root` afterwards.
    static func make(
        _ configure: (inout LocalAPIConfiguration) -> Void
    ) async throws -> (Agent, LocalAPI, ServiceGroup, root: String) {
        let root = NSTemporaryDirectory() + "lansync-api-port-\(UUID().uuidString)"
        _ = try LANSyncNode.initialize(at: DataDirectory(path: root), name: "second", machineIDPath: "/nonexistent")
        let node = try LANSyncNode.open(at: DataDirectory(path: root))
        _ = try node.createGroup()
        var agentConfiguration = AgentConfiguration()
        agentConfiguration.listenHost = "127.0.0.1"
        agentConfiguration.listenPort = 0
        agentConfiguration.discovery = false
        let agent = try Agent(node: node, configuration: agentConfiguration, logger: Logger(label: "test"))
        var configuration = LocalAPIConfiguration()
        configure(&configuration)
        let api = await LocalAPI(agent: agent, configuration: configuration, logger: Logger(label: "test"))
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: agent), .init(service: api)],
                logger: Logger(label: "test")
            )
        )
        return (agent, api, group, root)
    }

    /// Whoever waits for the API's port hears that there will be none when the port chosen is
    /// taken (it used to wait until the process ended), and why.
    @Test(.timeLimit(.minutes(10))) func aChosenPortThatIsTakenIsSaidToWhoeverWaitsForThePort() async throws {
        try await Self.withTakenPort { taken in
            let (_, api, group, root) = try await Self.make {
                $0.port = taken
                $0.takeAFreePortWhenTaken = false
            }
            defer { try? FileManager.default.removeItem(atPath: root) }
            let running = Task { try await group.run() }
            defer { running.cancel() }
            do {
                let port = try await api.port()
                Issue.record("the API says it listens on \(port), though \(taken) was chosen and is taken")
            } catch let error as StoppedBeforeListeningError {
                #expect(error.description.contains("\(taken) is taken"), "\(error)")
            }
            await group.triggerGracefulShutdown()
            _ = try? await running.value
        }
    }

    /// An API stopped before it listened (here, before it started) ends every wait for its port.
    @Test(.timeLimit(.minutes(10))) func aWaitForThePortEndsWhenTheAPIStopsWithoutListening() async throws {
        let (_, api, _, root) = try await Self.make { _ in }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let wait = Task { try await api.port() }
        let run = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await api.run()
        }
        try await run.value
        await #expect(throws: StoppedBeforeListeningError.self) { try await wait.value }
        await #expect(throws: StoppedBeforeListeningError.self) { try await api.port() }
    }

    @Test func theDefaultPortTakenByAnotherProgramMakesTheAPITakeAFreeOneAndSaySo() async throws {
        try await Self.withTakenPort { taken in
            let (part, address, socket) = try await Self.run { $0.port = taken }
            #expect(part?.state == .running, "\(String(describing: part))")
            #expect(part?.detail?.contains("(port \(taken) was taken)") == true, "\(String(describing: part))")
            let port = address.flatMap { $0.split(separator: ":").last }.flatMap { Int($0) }
            #expect(port != nil && port != taken, "\(String(describing: address))")
            #expect(socket)
        }
    }

    @Test func aChosenPortThatIsTakenLeavesTheUnixSocketServingAndStatusSaysWhy() async throws {
        try await Self.withTakenPort { taken in
            let (part, address, socket) = try await Self.run {
                $0.port = taken
                $0.takeAFreePortWhenTaken = false
            }
            #expect(part?.state == .running, "\(String(describing: part))")
            #expect(
                part?.detail?.contains("no TCP port") == true && part?.detail?.contains("unix") == true,
                "\(String(describing: part))"
            )
            #expect(address == nil)
            #expect(socket)
        }
    }
}
