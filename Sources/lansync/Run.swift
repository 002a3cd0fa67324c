import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent
import LANSyncLocalAPI
import Logging
import ServiceLifecycle
import Synchronization

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the node: sync with the group's other devices until stopped.",
        discussion: """
            Listens for group members (TCP port 7741 by default), advertises itself over mDNS (through avahi-daemon) and dials every node of its group found there, as well as the static peers given with --peer, retrying with backoff while they are away. The mDNS record holds only the protocol version and the group's public tag: no device ID, no names. Without avahi-daemon it warns once, syncs with static peers, and picks discovery up again when the daemon starts. Connections are authenticated and encrypted (Noise, with the group secret); devices outside the group learn nothing. New writes — from an app or from `lansync log append` — reach connected peers at once. Stop with Ctrl-C or SIGTERM: connections close cleanly and nothing is half-written.

            While it runs, `lansync peers`, `lansync status` and `lansync sync --wait` ask it over a local socket.

            A node in several groups (`lansync groups`) serves them all from this one process, on one port and one mDNS instance: each connection lands in the group whose key the peer used, and nothing of one group reaches another. The local API serves each group under /v1/groups/NAME/ with that group's own token (api-token in its data directory). A static peer belongs to one group: on a node of several groups name it, --peer family-b=192.168.1.20:7741. When `lansync group create`, `join` or `leave` changes the node's groups, the agent restarts in place (same process and ports) to serve the groups there are now. --group NAME runs an agent for that group alone (it stops when that group is left).

            Examples:
              lansync run
              lansync run --listen 0.0.0.0:7741 --peer 192.168.1.20:7741 --peer laptop.local:7741
              lansync run --listen 127.0.0.1:0      (port 0 picks a free port and prints it)
              lansync run --no-mdns --peer 10.0.0.5:7741   (no discovery: static peers only)
              lansync --config /etc/lansync/lansync.conf run   (settings from a file; see `lansync help config`)
            """
    )

    @OptionGroup var global: GlobalOptions
    @Option(
        help: ArgumentHelp(
            "Address to listen on, HOST:PORT.",
            discussion: "Default: [::]:7741, every IPv6 and IPv4 address (IPv4 only where the machine has no IPv6).",
            valueName: "host:port"
        )
    )
    var listen: String?
    @Option(
        name: .customLong("peer"),
        help: ArgumentHelp(
            "A peer to dial, HOST:PORT, or GROUP=HOST:PORT on a node of several groups (repeatable).",
            valueName: "host:port"
        )
    )
    var peers: [String] = []
    @Flag(name: .customLong("no-mdns"), help: "Do not use mDNS discovery (static peers only).")
    var noMDNS = false
    @Option(
        name: .customLong("mdns-name"),
        help: ArgumentHelp(
            "Instance name to advertise over mDNS.",
            discussion: "Default: 'LANSync' and a random suffix, new on each start. Keep it free of names of people.",
            valueName: "name"
        )
    )
    var mdnsName: String?
    @Option(
        name: .customLong("max-clock-skew"),
        help: ArgumentHelp(
            "Refuse peers whose clock differs from ours by more than this many seconds.",
            valueName: "seconds"
        )
    )
    var maxClockSkew: Int?
    @Option(
        name: .customLong("max-connections"),
        help: ArgumentHelp("Connections at once, in and out, per group served (default 64).", valueName: "count")
    )
    var maxConnections: Int?
    @Option(
        name: .customLong("api"),
        help: ArgumentHelp(
            "Where the local HTTP API listens, HOST:PORT, on loopback.",
            discussion:
                "Default: 127.0.0.1:7742; port 0 picks a free one. Requests need the token in the data directory's api-token file. Also served on api.sock in the data directory. See `lansync help api`.",
            valueName: "host:port"
        )
    )
    var api: String?
    @Flag(name: .customLong("no-api"), help: "Do not serve the local HTTP API.")
    var noAPI = false
    @Option(
        name: .customLong("log-level"),
        help: "trace, debug, info, notice, warning, error or critical (default info)."
    )
    var logLevel: String?

    /// Whether the node still has what `lansync run` serves: every group (none selected), or the
    /// one `--group` names.
    static func hasGroupToServe(in node: DataDirectory, selected: String?) -> Bool {
        guard let selected else { return !((try? NodeGroups.list(in: node)) ?? []).isEmpty }
        return (try? NodeGroups.group(selectedBy: selected, in: node)) != nil
    }

    /// `GROUP=HOST:PORT` split in two; nil for a plain `HOST:PORT`.
    static func groupPeer(_ text: String) -> (group: String, address: String)? {
        guard let equals = text.firstIndex(of: "=") else { return nil }
        return (String(text[..<equals]), String(text[text.index(after: equals)...]))
    }

    func validate() throws {
        if let listen, PeerAddress(listen) == nil { throw ValidationError("--listen '\(listen)' is not HOST:PORT") }
        for peer in peers {
            if let (group, address) = Self.groupPeer(peer) {
                if let problem = NodeGroups.nameProblem(group) { throw ValidationError("--peer '\(peer)': \(problem)") }
                if PeerAddress(address) == nil {
                    throw ValidationError(
                        "--peer '\(peer)': '\(address)' is not HOST:PORT (e.g. family-b=192.168.1.20:7741)"
                    )
                }
            } else if PeerAddress(peer) == nil {
                throw ValidationError("--peer '\(peer)' is not HOST:PORT or GROUP=HOST:PORT (e.g. 192.168.1.20:7741)")
            }
        }
        if let mdnsName, mdnsName.isEmpty || mdnsName.utf8.count > 63 {
            throw ValidationError("--mdns-name must be 1 to 63 bytes long (a DNS label)")
        }
        if let api {
            guard let address = PeerAddress(api) else {
                throw ValidationError("--api '\(api)' is not HOST:PORT (e.g. 127.0.0.1:7742)")
            }
            if let problem = LocalAPIConfiguration.hostProblem(address.host) {
                throw ValidationError("--api: \(problem)")
            }
        }
        if api != nil && noAPI { throw ValidationError("give --api or --no-api, not both") }
        if let maxClockSkew, maxClockSkew < 1 { throw ValidationError("--max-clock-skew must be at least 1 second") }
        if let maxConnections, !(1...4_096).contains(maxConnections) {
            throw ValidationError("--max-connections must be from 1 to 4096")
        }
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        let inherited = Restart.openDescriptors()
        let file = LoadedConfig.file
        let level = Logger.Level(rawValue: logLevel ?? file.logLevel ?? "info") ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "lansync")
        // Defaults, then the config file, then flags.
        var configuration = AgentConfiguration()
        file.apply(to: &configuration)
        if let listen = listen.flatMap({ PeerAddress($0) }) {
            configuration.listenHost = listen.host
            configuration.listenPort = listen.port
        }
        // A peer named with its group (GROUP=HOST:PORT) is dialed with that group's key.
        var groupPeers: [String: [PeerAddress]] = [:]
        let plainPeers = peers.compactMap { peer -> PeerAddress? in
            guard let (group, address) = Self.groupPeer(peer) else { return PeerAddress(peer) }
            groupPeers[group, default: []].append(PeerAddress(address)!)
            return nil
        }
        if !plainPeers.isEmpty { configuration.staticPeers = plainPeers }
        if noMDNS { configuration.discovery = false }
        if let mdnsName { configuration.mdnsName = mdnsName }
        if let maxClockSkew { configuration.maxClockSkewMilliseconds = UInt64(maxClockSkew) * 1000 }
        if let maxConnections { configuration.maxConnections = maxConnections }
        // A restart keeps the ports it had (port 0 picked them): peers and apps dial them still.
        if let kept = Restart.keptPorts, configuration.listenPort == 0 { configuration.listenPort = kept.sync }
        if let path = LoadedConfig.path { logger.info("configuration file", metadata: ["config.path": "\(path)"]) }
        let restart = Restart(inherited: inherited)
        let node = global.nodeDirectory
        let selected = global.group
        configuration.whenGroupsChange = {
            // Serving every group: restart to serve those there are now. Serving one: stop once it is left.
            guard selected != nil else {
                restart.request(again: true)
                return true
            }
            guard !Self.hasGroupToServe(in: node, selected: selected) else { return false }
            restart.request(again: false)
            return true
        }
        if Restart.isRestarted, !Self.hasGroupToServe(in: node, selected: selected) {
            // Restarted after `lansync group leave` took the last group it served.
            Output().line("this node is in no group to serve any more (it left); stopping")
            return
        }
        // One agent per group the node serves: the selected one, or with several groups and none
        // named all of them, behind one port and one mDNS instance (`GroupRouter`).
        let groups = try await reportingErrors {
            global.group == nil ? try NodeGroups.list(in: global.nodeDirectory) : []
        }
        let several = groups.count > 1
        if several, !configuration.staticPeers.isEmpty {
            note(
                "lansync: error: this node is in \(groups.count) groups and a static peer belongs to one of them: name its "
                    + "group, --peer GROUP=HOST:PORT (such as --peer \(groups[1].name)=192.168.1.20:7741), or let mDNS find them"
            )
            throw ExitCode(1)
        }
        let agents = try await reportingErrors {
            let directories = several ? groups.map(\.directory) : [try global.selectedDirectory()]
            let nodes = try directories.map { directory in
                let node = try global.openNode(at: directory)
                guard !node.store.isReadOnly else {
                    throw LANSyncError(
                        .invalidInput,
                        "the data directory \(node.dataDirectory.path) is read-only, and the agent writes what it syncs; "
                            + "make it writable (or copy it somewhere that is) to run the agent. Reading works: status, log list, query, export"
                    )
                }
                return node
            }
            var peers = groupPeers
            if Restart.isRestarted {
                // Restarted after a group was left: its static peers go with it.
                let served = Set(nodes.map { NodeGroups.name(of: $0.dataDirectory) })
                for name in peers.keys where !served.contains(name) {
                    logger.notice(
                        "static peers of a group no longer served are not dialed",
                        metadata: ["group": "\(name)"]
                    )
                    peers[name] = nil
                }
            }
            return try Agent.serving(nodes, configuration: configuration, staticPeers: peers, logger: logger)
        }
        let host = configuration.listenHost
        let first = agents[0]
        let serving =
            several ? "serving \(counted(agents.count, "group")): \(groups.map(\.name).joined(separator: ", "))" : nil
        // The lines that say where the node listens, printed once it does: each a child task of
        // the run below, cancelled when the run ends (an agent that never listens prints nothing).
        var announcements: [@Sendable () async -> Void] = [
            {
                guard let port = try? await first.listeningPort() else { return }
                restart.keep(sync: port)
                let out = Output()
                out.line("listening on \(PeerAddress(host: host, port: port))")
                if let serving { out.line(serving) }
                out.flush()
            }
        ]
        var services: [any Service] = agents
        if !noAPI && (api != nil || !file.apiOff) {
            var apiConfiguration = LocalAPIConfiguration()
            if let address = api.flatMap({ PeerAddress($0) }) ?? file.api {
                apiConfiguration.host = address.host
                apiConfiguration.port = address.port
                // A port someone chose and cannot have is theirs to fix; the default one is not.
                apiConfiguration.takeAFreePortWhenTaken = false
            }
            if let kept = Restart.keptPorts?.api, apiConfiguration.port == 0 { apiConfiguration.port = kept }
            // One API for every group served: each group's routes under /v1/groups/NAME/, behind
            // that group's own token.
            let localAPI = await LocalAPI(serving: agents, configuration: apiConfiguration, logger: logger)
            services.append(localAPI)
            let apiHost = apiConfiguration.host
            announcements.append {
                guard let port = try? await localAPI.port() else { return }
                restart.keep(api: port)
                let out = Output()
                out.line("local API on http://\(PeerAddress(host: apiHost, port: port))")
                out.flush()
            }
        }
        let group = ServiceGroup(
            services: services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        restart.set(group)
        defer { if restart.isRequested { restart.execute(logger: logger) } }
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for announce in announcements { tasks.addTask(operation: announce) }
                try await group.run()
                tasks.cancelAll()
            }
        } catch let error as LANSyncError {
            note("lansync: error: \(error.message)")
            throw ExitCode(1)
        } catch {
            note("lansync: error: \(error)")
            throw ExitCode(1)
        }
    }
}

/// Restarting `lansync run` in place when the node's groups change under it (a group created,
/// joined or left while it runs): the agents stop gracefully, then the process executes itself
/// again with the same arguments and PID, and serves the groups the node has now.
final class Restart: Sendable {
    private let state = Mutex<(requested: Bool, group: ServiceGroup?, sync: Int?, api: Int?)>((false, nil, nil, nil))
    private static let marker = "LANSYNC_RESTARTED"

    /// Whether this process is such a restart.
    static var isRestarted: Bool { ProcessInfo.processInfo.environment[marker] != nil }

    /// The ports the process had before it restarted ("SYNC" or "SYNC:API" in the marker).
    static var keptPorts: (sync: Int, api: Int?)? {
        guard let text = ProcessInfo.processInfo.environment[marker] else { return nil }
        let parts = text.split(separator: ":").map { Int($0) }
        guard let sync = parts.first ?? nil else { return nil }
        return (sync, parts.count > 1 ? parts[1] : nil)
    }

    /// The descriptors the process was started with (a supervisor's, such as a pipe it watches
    /// for the process's end): passed on across a restart, as they were received. All others are
    /// the agents' own and close.
    private let inherited: Set<Int32>

    init(inherited: Set<Int32>) { self.inherited = inherited }

    static func openDescriptors() -> Set<Int32> {
        Set(((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int32($0) })
    }

    func keep(sync: Int) { state.withLock { $0.sync = sync } }
    func keep(api: Int) { state.withLock { $0.api = api } }

    func set(_ group: ServiceGroup) { state.withLock { $0.group = group } }

    var isRequested: Bool { state.withLock { $0.requested } }

    /// Asks the running agents to stop, for the process to start again (or only to stop).
    func request(again: Bool) {
        let group = state.withLock { state in
            state.requested = again
            return state.group
        }
        Task { await group?.triggerGracefulShutdown() }
    }

    /// Replaces the process with a fresh `lansync run`; returns only when that failed.
    func execute(logger: Logger) {
        let (sync, api) = state.withLock { ($0.sync, $0.api) }
        setenv(Self.marker, [sync ?? 0, api].compactMap { $0.map(String.init) }.joined(separator: ":"), 1)
        // Connections still open (a control request taken while stopping) must not live on,
        // unanswered, in the new process.
        for descriptor in Self.openDescriptors().subtracting(inherited) where descriptor > 2 {
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        fflush(nil)
        logger.notice("the node's groups changed: restarting to serve them")
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        logger.error("could not restart: \(String(cString: strerror(errno))); start `lansync run` again")
    }
}
