import Foundation
package import Hummingbird
import HummingbirdCore
package import LANSync
public import LANSyncAgent
public import Logging
import NIOCore
public import ServiceLifecycle
import Synchronization

/// Where the local API listens.
public struct LocalAPIConfiguration: Sendable {
    /// The loopback address for programs and the dashboard. Only loopback hosts are accepted:
    /// the API is for this machine's programs; peers sync over the agent's own port.
    public var host = "127.0.0.1"
    /// 0 picks a free port (`LocalAPI.address()` says which).
    public var port = LocalAPIConfiguration.defaultPort
    /// Also serve on `api.sock` in the data directory (mode 0600). It does not depend on the
    /// TCP port: it serves when the port cannot be had.
    public var unixSocket = true
    /// When `port` is taken (another agent of another data directory on this machine), take a
    /// free one instead and say so; `api-address` tells clients which. Off when the port was
    /// chosen: a chosen port that is taken is an error to fix.
    public var takeAFreePortWhenTaken = true

    /// The TCP port the local API listens on unless told otherwise.
    public static let defaultPort = 7742
    /// The defaults: 127.0.0.1 at `defaultPort`, and the Unix socket in the data directory.
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
    /// Every group served, the first one first: each under `/v1/groups/{name}/`; today's `/v1/…`
    /// routes, the dashboard and the API's files (`api-address`, `api.sock`) are the first's.
    let groups: [(name: String, agent: Agent, node: LANSyncNode)]
    let configuration: LocalAPIConfiguration
    let logger: Logger
    /// The TCP port once listening, or why there is none: awaited by `port()`.
    private let bound = OnceKnown<Int>()

    /// The first group's agent and node.
    var agent: Agent { groups[0].agent }
    var node: LANSyncNode { groups[0].node }

    /// The local API and dashboard of `agent`'s node, not serving yet: run it in the same `ServiceGroup` as the agent.
    public convenience init(
        agent: Agent,
        configuration: LocalAPIConfiguration = LocalAPIConfiguration(),
        logger: Logger
    ) async {
        await self.init(serving: [agent], configuration: configuration, logger: logger)
    }

    /// One API for the agents of a node's groups served by one process (`Agent.serving`): each
    /// group's routes under `/v1/groups/{name}/…` behind that group's own token; today's `/v1/…`
    /// routes and the dashboard are the first group's.
    public init(
        serving agents: [Agent],
        configuration: LocalAPIConfiguration = LocalAPIConfiguration(),
        logger: Logger
    ) async {
        var groups: [(name: String, agent: Agent, node: LANSyncNode)] = []
        for agent in agents {
            let node = await agent.node
            groups.append((NodeGroups.name(of: node.dataDirectory), agent, node))
        }
        self.groups = groups
        self.configuration = configuration
        self.logger = logger
    }

    var dataDirectory: DataDirectory { node.dataDirectory }
    var addressFile: String { dataDirectory.path + "/api-address" }
    var socketPath: String { dataDirectory.path + "/api.sock" }

    /// Waits until the API listens on TCP, and returns its port. Throws
    /// `StoppedBeforeListeningError` if it will not (the port is taken and was chosen, the agent
    /// failed to start, the API was stopped first), and `CancellationError` when the waiting task
    /// is cancelled.
    public func port() async throws -> Int {
        try await bound.wait()
    }

    public func run() async throws {
        // Whoever still waits for the port when the API stops without having listened hears so.
        defer { bound.settle(.failure(StoppedBeforeListeningError(service: "the local API"))) }
        // Serve only once the agent holds its control socket: an agent that fails to start
        // (another one already runs for this data directory) must not touch that one's API files.
        while true {
            guard !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
            let parts = agent.partStatuses
            if parts.contains(where: { $0.state == .failed }) { return }
            if parts.first(where: { $0.name == "control socket" })?.state == .running { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        var served: [(name: String, agent: Agent, node: LANSyncNode, token: APIToken)] = []
        for group in groups {
            served.append(
                (group.name, group.agent, group.node, try APIToken.loadOrCreate(in: group.node.dataDirectory))
            )
        }
        let nodeToken = try APIToken.loadOrCreate(
            in: groups[0].node.dataDirectory.node,
            fileName: APIToken.nodeFileName
        )
        let feeds = OpenFeeds()
        let responder = Self.router(groups: served, nodeToken: nodeToken, feeds: feeds).buildResponder()
        let host = configuration.host
        let agent = agent
        let logger = logger
        agent.reportPart(Self.partName, .starting)
        let connections = OpenConnections()
        let serving = ServingState(unixSocket: configuration.unixSocket && socketPath.utf8.count < 108)
        if configuration.unixSocket && !serving.unixSocket {
            logger.warning(
                "local API: no Unix socket, the data directory's path is too long for one",
                metadata: ["path": "\(socketPath)"]
            )
        }
        defer {
            unlink(addressFile)
            if serving.unixSocket { unlink(socketPath) }
            for group in groups { group.agent.reportPart(Self.partName, .stopped) }
        }
        await withGracefulShutdownHandler {
            // Each server on its own: a TCP port that cannot be had leaves the Unix socket serving.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    await serveTCP(responder: responder, host: host, serving: serving, connections: connections)
                }
                if serving.unixSocket {
                    let path = socketPath
                    unlink(path)
                    group.addTask { [self] in
                        do {
                            let server = try Self.server(
                                responder,
                                at: .unixDomainSocket(path: path),
                                connections: connections,
                                logger: logger
                            ) { [self] _ in
                                chmod(path, 0o600)
                                serving.update { $0.socket = .running }
                                reportServing(serving)
                            }
                            try await server.run()
                        } catch {
                            serving.update { $0.socket = .failed("\(error)") }
                            reportServing(serving)
                            logger.error("local API: the Unix socket \(path) stopped: \(error)")
                        }
                    }
                }
            }
            // Both servers ended (each has logged why): stay up until the agent stops, since a
            // service that returns ends the whole group, and sync goes on without the API.
            try? await gracefulShutdown()
        } onGracefulShutdown: {
            feeds.closeAll()
        }
    }

    /// One of the API's servers, HTTP/1.1 at `address` (`APIServer`): connections counted against
    /// `APILimits.connections` across both servers, and closed when a request head is not
    /// complete, or no request comes, within `APILimits.idleSeconds` (a request under way, a
    /// change feed too, is never cut).
    static func server(
        _ responder: some HTTPResponder<BasicRequestContext>,
        at address: BindAddress,
        connections: OpenConnections,
        logger: Logger,
        onRunning: @escaping @Sendable (any Channel) async -> Void
    ) throws -> any Service {
        try APIServer.make(
            responder,
            at: address,
            handlers: { [ConnectionBoundHandler(connections)] },
            idleTimeout: .seconds(APILimits.idleSeconds),
            maximumConnections: APILimits.acceptedConnections,
            logger: logger,
            onRunning: onRunning
        )
    }

    /// The name the API has among the agent's parts (`lansync status`).
    static let partName = "local API"

    /// Serves TCP on the configured port, or on a free one when that is taken and the
    /// configuration allows it. A failure is logged and shown in `status`; it never ends the agent.
    private func serveTCP(
        responder: some HTTPResponder<BasicRequestContext>,
        host: String,
        serving: ServingState,
        connections: OpenConnections
    ) async {
        var port = configuration.port
        while true {
            do {
                let server = try Self.server(
                    responder,
                    at: .hostname(host, port: port),
                    connections: connections,
                    logger: logger
                ) {
                    [self] channel in
                    let bound = channel.localAddress?.port ?? 0
                    serving.update {
                        $0.tcp = .running
                        $0.port = bound
                    }
                    listening(on: bound, host: host)
                    reportServing(serving)
                }
                try await server.run()
                return
            } catch let error as IOError
                where error.errnoCode == EADDRINUSE && port != 0 && configuration.takeAFreePortWhenTaken
            {
                logger.warning(
                    "local API: port \(port) is taken (another agent on this machine?); taking a free one, which api-address names",
                    metadata: ["api.port.taken": "\(port)"]
                )
                serving.update { $0.taken = port }
                port = 0
            } catch {
                let why =
                    (error as? IOError)?.errnoCode == EADDRINUSE
                    ? "\(host):\(port) is taken (choose another with --api HOST:PORT, or leave --api out)" : "\(error)"
                serving.update { $0.tcp = .failed(why) }
                bound.settle(.failure(StoppedBeforeListeningError(service: "the local API's TCP server", reason: why)))
                reportServing(serving)
                logger.error(
                    "local API on \(host):\(port) stopped: \(error); apps reach it on the Unix socket only until the agent restarts (choose another port with --api HOST:PORT)"
                )
                return
            }
        }
    }

    /// Shows where the API stands in the agents' parts: running while either server serves.
    private func reportServing(_ serving: ServingState) {
        let (state, detail) = serving.summary(host: configuration.host, socket: socketPath)
        for group in groups { group.agent.reportPart(Self.partName, state, detail: detail) }
    }

    /// Every route behind the guard (the OpenAPI test lists them from here).
    package static func router(
        agent: Agent,
        node: LANSyncNode,
        token: APIToken,
        feeds: OpenFeeds = OpenFeeds(),
        sessions: DashboardSessions = DashboardSessions()
    ) -> Router<BasicRequestContext> {
        router(
            groups: [(NodeGroups.name(of: node.dataDirectory), agent, node, token)],
            feeds: feeds,
            sessions: sessions
        )
    }

    /// The routes of every group served: today's `/v1/…` for the first group, behind its token;
    /// `/v1/groups/{name}/…` for each, behind that group's own token, so an app given one group's
    /// token reaches that group alone (a wrong group or token is one answer: the token does not
    /// match); `GET /v1/groups` lists the groups the token opens. The node's token opens them all.
    /// The dashboard: a node of one group's pages under `/dashboard/`; with several, the list of
    /// groups there and each group's pages under `/dashboard/groups/{name}/`, a login link opening
    /// the groups its token opens.
    package static func router(
        groups: [(name: String, agent: Agent, node: LANSyncNode, token: APIToken)],
        nodeToken: APIToken? = nil,
        feeds: OpenFeeds = OpenFeeds(),
        sessions: DashboardSessions = DashboardSessions()
    ) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        // Every request: addressed to loopback, from no other site. The API's routes: the token.
        // The dashboard's pages: a browser session (`SessionGuard`); its login link: the one-time code.
        router.add(middleware: LoopbackGuard())
        router.add(middleware: UnknownRouteAsJSON())
        let first = groups[0]
        let several = groups.count > 1
        /// Whether the request carries the node's token, which opens every group.
        @Sendable func opensEveryGroup(_ request: Request) throws -> Bool {
            nodeToken?.matches(try TokenGuard<BasicRequestContext>.given(request)) == true
        }
        let api = router.group("v1").add(middleware: TokenGuard(token: first.token, nodeToken: nodeToken))
        LocalAPIRoutes(agent: first.agent, node: first.node, feeds: feeds).register(on: api)
        router.get("login") { request, _ in
            DashboardRoutes.login(request, sessions: sessions, device: first.node.identity.name)
        }
        api.post("dashboard/links") { request, _ in
            // The first group's token opens the first group's pages; the node's, every group's.
            DashboardRoutes.newLink(
                sessions: sessions,
                scope: try opensEveryGroup(request) || !several ? nil : [first.name]
            )
        }
        if several {
            GroupsOverview(groups: groups.map { ($0.name, $0.agent, $0.node) }, sessions: sessions).register(on: router)
            for group in groups {
                DashboardRoutes(agent: group.agent, node: group.node, sessions: sessions, groupName: group.name)
                    .register(on: router)
            }
        } else {
            DashboardRoutes(agent: first.agent, node: first.node, sessions: sessions).register(on: router)
        }
        var byName: [String: (routes: LocalAPIRoutes, token: APIToken)] = [:]
        for group in groups {
            byName[group.name] = (LocalAPIRoutes(agent: group.agent, node: group.node, feeds: feeds), group.token)
        }
        let scoped = byName
        let tokens = scoped.mapValues(\.token)
        let inGroup = router.group("v1/groups/:group").add(
            middleware: GroupTokenGuard(tokens: tokens, nodeToken: nodeToken)
        )
        LocalAPIRoutes.register(on: inGroup) { context in
            guard let name = context.parameters.get("group"), let group = scoped[name] else {
                throw GroupTokenGuard<BasicRequestContext>.wrong
            }
            return group.routes
        }
        inGroup.post("dashboard/links") { request, context in
            // The guard let the request in: a name it knows, and its token or the node's.
            let name = context.parameters.get("group") ?? ""
            return DashboardRoutes.newLink(sessions: sessions, scope: try opensEveryGroup(request) ? nil : [name])
        }
        router.get("v1/groups") { request, _ in
            let given = try TokenGuard<BasicRequestContext>.given(request)
            let byNode = try opensEveryGroup(request)
            let opened = groups.filter { byNode || $0.token.matches(given) }
            guard !opened.isEmpty else { throw GroupTokenGuard<BasicRequestContext>.wrong }
            let lines = opened.map { group in
                ExportFile.object([
                    ("name", ExportFile.quoted(group.name)),
                    ("tag", (try? group.node.group()?.tag).map(ExportFile.quoted) ?? "null"),
                ])
            }
            return LocalAPIRoutes.json("{\"groups\":[" + lines.joined(separator: ",") + "]}")
        }
        return router
    }

    private func listening(on port: Int, host: String) {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        try? (address + "\n").write(toFile: addressFile, atomically: true, encoding: .utf8)
        logger.info("local API listening", metadata: ["api.address": "\(address)"])
        bound.settle(.success(port))
    }
}

/// What the local API's servers are doing, for its line in `lansync status`.
final class ServingState: Sendable {
    enum Server: Sendable, Equatable {
        case starting
        case running
        case failed(String)

        var isFailed: Bool { if case .failed = self { true } else { false } }
    }

    struct State: Sendable {
        var tcp = Server.starting
        var socket = Server.starting
        /// The TCP port bound.
        var port = 0
        /// The configured port, when it was taken and a free one was used instead.
        var taken: Int?
    }

    let unixSocket: Bool
    private let state = Mutex(State())

    init(unixSocket: Bool) { self.unixSocket = unixSocket }

    func update(_ change: (inout State) -> Void) { state.withLock { change(&$0) } }

    func summary(host: String, socket path: String) -> (AgentPartState, String) {
        let state = state.withLock { $0 }
        var parts = [String]()
        switch state.tcp {
        case .running:
            let address = host.contains(":") ? "[\(host)]:\(state.port)" : "\(host):\(state.port)"
            parts.append("http://\(address)" + (state.taken.map { " (port \($0) was taken)" } ?? ""))
        case .failed(let why): parts.append("no TCP port: \(why)")
        case .starting: parts.append("TCP starting")
        }
        if unixSocket {
            switch state.socket {
            case .running: parts.append("unix \(path)")
            case .failed(let why): parts.append("no Unix socket: \(why)")
            case .starting: break
            }
        }
        // Running while either server serves; failed once each one it has has failed.
        let running = state.tcp == .running || (unixSocket && state.socket == .running)
        let failed = state.tcp.isFailed && (!unixSocket || state.socket.isFailed)
        return (running ? .running : failed ? .failed : .starting, parts.joined(separator: "; "))
    }
}
