import Foundation
package import Hummingbird
public import LANSyncAgent
package import LANSync
public import Logging
public import ServiceLifecycle
import Synchronization

/// Where the local API listens.
public struct LocalAPIConfiguration: Sendable {
    /// The loopback address for programs and the dashboard. Only loopback hosts are accepted:
    /// the API is for this machine's programs; peers sync over the agent's own port.
    public var host = "127.0.0.1"
    /// 0 picks a free port (`LocalAPI.address()` says which).
    public var port = LocalAPIConfiguration.defaultPort
    /// Also serve on `api.sock` in the data directory (mode 0600).
    public var unixSocket = true

    public static let defaultPort = 7742
    public init() {}

    /// Why `host` cannot be the API's, or nil.
    public static func hostProblem(_ host: String) -> String? {
        PeerAddress.isLoopback(host: host)
            ? nil : "the local API listens on loopback only (127.0.0.1, ::1 or localhost), not '\(host)'"
    }
}

/// The local HTTP API as a service beside the agent: what the CLI can do, over JSON and
/// Server-Sent Events, for apps in any language and the dashboard. Requests need the data
/// directory's token (`APIToken`); see docs/openapi.json and docs/local-api.md.
///
/// While it runs, `api-address` in the data directory holds `HOST:PORT`, so local programs and
/// `lansync dashboard` find it; the file is removed when it stops.
public final class LocalAPI: Service, Sendable {
    let agent: Agent
    let node: LANSyncNode
    let configuration: LocalAPIConfiguration
    let logger: Logger
    private let bound = Mutex<(port: Int?, waiters: [CheckedContinuation<Int, Never>])>((nil, []))

    public init(agent: Agent, configuration: LocalAPIConfiguration = LocalAPIConfiguration(), logger: Logger) async {
        self.agent = agent
        node = await agent.node
        self.configuration = configuration
        self.logger = logger
    }

    var dataDirectory: DataDirectory { node.dataDirectory }
    var addressFile: String { dataDirectory.path + "/api-address" }
    var socketPath: String { dataDirectory.path + "/api.sock" }

    /// The TCP port once listening.
    public func port() async -> Int {
        await withCheckedContinuation { continuation in
            bound.withLock { bound in
                if let port = bound.port { continuation.resume(returning: port) } else { bound.waiters.append(continuation) }
            }
        }
    }

    public func run() async throws {
        // Serve only once the agent holds its control socket: an agent that fails to start
        // (another one already runs for this data directory) must not touch that one's API files.
        while true {
            guard !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
            let parts = agent.partStatuses
            if parts.contains(where: { $0.state == .failed }) { return }
            if parts.first(where: { $0.name == "control socket" })?.state == .running { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let token = try APIToken.loadOrCreate(in: dataDirectory)
        let feeds = OpenFeeds()
        let responder = Self.router(agent: agent, node: node, token: token, feeds: feeds).buildResponder()
        let host = configuration.host
        var servers: [any Service] = [
            Application(
                responder: responder, configuration: .init(address: .hostname(host, port: configuration.port), serverName: nil),
                onServerRunning: { [self] channel in listening(on: channel.localAddress?.port ?? 0, host: host) },
                eventLoopGroupProvider: .singleton, logger: logger)
        ]
        if configuration.unixSocket {
            if socketPath.utf8.count < 108 {
                unlink(socketPath)
                let path = socketPath
                servers.append(
                    Application(
                        responder: responder, configuration: .init(address: .unixDomainSocket(path: path), serverName: nil),
                        onServerRunning: { _ in chmod(path, 0o600) }, eventLoopGroupProvider: .singleton, logger: logger))
            } else {
                logger.warning("local API: no Unix socket, the data directory's path is too long for one", metadata: ["path": "\(socketPath)"])
            }
        }
        defer {
            unlink(addressFile)
            if configuration.unixSocket { unlink(socketPath) }
        }
        do {
            try await withGracefulShutdownHandler {
                try await ServiceGroup(services: servers, logger: logger).run()
            } onGracefulShutdown: {
                feeds.closeAll()
            }
        } catch {
            // Sync goes on without the API (the port may be another program's): say so and stay up.
            logger.error(
                "local API stopped: \(error); apps cannot reach it until the agent restarts (choose another port with --api HOST:PORT)")
            try? await gracefulShutdown()
        }
    }

    /// Every route behind the guard (the OpenAPI test lists them from here).
    package static func router(agent: Agent, node: LANSyncNode, token: APIToken, feeds: OpenFeeds = OpenFeeds(), sessions: DashboardSessions = DashboardSessions()
    ) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        // Every request: addressed to loopback, from no other site. The API's routes: the token.
        // The dashboard's pages: a browser session (`SessionGuard`); its login link: the one-time code.
        router.add(middleware: LoopbackGuard())
        router.add(middleware: UnknownRouteAsJSON())
        let api = router.group("v1").add(middleware: TokenGuard(token: token))
        LocalAPIRoutes(agent: agent, node: node, feeds: feeds).register(on: api)
        DashboardRoutes(agent: agent, node: node, sessions: sessions).register(on: router, api: api)
        return router
    }

    private func listening(on port: Int, host: String) {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        try? (address + "\n").write(toFile: addressFile, atomically: true, encoding: .utf8)
        logger.info("local API listening", metadata: ["api.address": "\(address)"])
        let waiters = bound.withLock { bound in
            bound.port = port
            defer { bound.waiters.removeAll() }
            return bound.waiters
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }
}
