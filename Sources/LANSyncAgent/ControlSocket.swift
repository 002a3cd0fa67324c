import Foundation
package import LANSync
import LANSyncTransport
import NIOCore
import NIOExtras
import NIOPosix

/// The local control socket, `control.sock` in the data directory (mode 0600): how the CLI talks
/// to a running agent. One JSON request per line (`{"command":"report"}`), one JSON answer per line.
/// Binding it is also the lock that keeps a second agent off the same data directory.
enum ControlSocket {
    static func path(for directory: DataDirectory) -> String { directory.path + "/control.sock" }

    typealias LineChannel = NIOAsyncChannel<ByteBuffer, ByteBuffer>

    static func lines(_ channel: any Channel) throws -> LineChannel {
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineBasedFrameDecoder()))
        return try LineChannel.wrapping(channel)
    }

    /// Binds the socket, refusing when another agent answers on it; a stale file is replaced.
    static func bind(_ directory: DataDirectory) async throws -> NIOAsyncChannel<LineChannel, Never> {
        let path = path(for: directory)
        if FileManager.default.fileExists(atPath: path) {
            if (try? await ControlClient.request(["command": "ping"], directory: directory)) != nil {
                throw LANSyncError(
                    .invalidInput,
                    "an agent is already running for \(directory.path); stop it first (one agent per data directory)"
                )
            }
            try? FileManager.default.removeItem(atPath: path)
        }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: false) { channel in
                channel.eventLoop.makeCompletedFuture { try lines(channel) }
            }
        chmod(path, 0o600)
        return channel
    }

    /// Answers requests until cancelled.
    static func serve(_ server: NIOAsyncChannel<LineChannel, Never>, agent: Agent) async throws {
        try await serveUntilCancelled(server) { client in
            try? await client.executeThenClose { requests, responses in
                for try await line in requests {
                    let answer = await respond(to: Array(line.readableBytesView), agent: agent)
                    try await responses.write(ByteBuffer(bytes: answer + [0x0A]))
                }
            }
        }
    }

    static func respond(to request: [UInt8], agent: Agent) async -> [UInt8] {
        let object = try? JSONSerialization.jsonObject(with: Data(request)) as? [String: Any]
        switch object?["command"] as? String {
        case "ping":
            return Array("{\"ok\":true}".utf8)
        case "report":
            return (try? [UInt8](JSONEncoder().encode(await agent.report()))) ?? Array("{}".utf8)
        case "invite":
            let minutes = Int(object?["minutes"] as? String ?? "") ?? 5
            do {
                let window = try await agent.openPairingWindow(minutes: minutes)
                let answer = ["code": window.code, "port": "\(window.port)", "closes_at": "\(window.closesAt)"]
                return (try? [UInt8](JSONSerialization.data(withJSONObject: answer))) ?? Array("{}".utf8)
            } catch {
                let answer = ["error": "could not open a pairing window: \(error)"]
                return (try? [UInt8](JSONSerialization.data(withJSONObject: answer))) ?? Array("{}".utf8)
            }
        case "invite-status":
            return (try? [UInt8](JSONSerialization.data(withJSONObject: await agent.pairingStatus())))
                ?? Array("{}".utf8)
        case "group-changed":
            // `lansync group remove` moved the group to a new epoch: use its key from now on.
            await agent.reloadGroup()
            await agent.pushToAllPeers()
            return Array("{\"ok\":true}".utf8)
        case "groups-changed":
            // A group was added to this node or left: the process serves the groups it has now.
            guard let restart = agent.configuration.whenGroupsChange, restart() else {
                return Array("{\"error\":\"this agent serves the groups it started with\"}".utf8)
            }
            return Array("{\"ok\":true}".utf8)
        case "kick":
            // The CLI wrote to the replica: push to peers now rather than at the next poll.
            await agent.pushToAllPeers()
            return Array("{\"ok\":true}".utf8)
        default:
            return Array("{\"error\":\"unknown command\"}".utf8)
        }
    }
}

/// The CLI's side of the control socket.
package enum ControlClient {
    /// Sends one request; nil when no agent is running for the directory.
    static func request(_ request: [String: String], directory: DataDirectory) async throws -> Data? {
        let path = ControlSocket.path(for: directory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let channel: ControlSocket.LineChannel
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(2))
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture { try ControlSocket.lines(channel) }
                }
        } catch {
            return nil  // a stale socket from an agent that was killed
        }
        // An agent stopping (or restarting) may take the request and never answer: give up then.
        let giveUp = channel.channel.eventLoop.scheduleTask(in: .seconds(10)) { channel.channel.close(promise: nil) }
        defer { giveUp.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            let body = try JSONSerialization.data(withJSONObject: request)
            try await outbound.write(ByteBuffer(bytes: [UInt8](body) + [0x0A]))
            for try await line in inbound { return Data(line.readableBytesView) }
            return nil
        }
    }

    /// The running agent's report, or nil when no agent runs for this data directory.
    package static func report(_ directory: DataDirectory) async -> AgentReport? {
        guard let data = try? await request(["command": "report"], directory: directory) else { return nil }
        return try? JSONDecoder().decode(AgentReport.self, from: data)
    }

    /// Tells a running agent that this process just wrote to the replica, so it pushes to peers
    /// at once. Does nothing when no agent runs (the write is there for when one starts).
    package static func kick(_ directory: DataDirectory) async {
        _ = try? await request(["command": "kick"], directory: directory)
    }

    /// Tells a running agent that the group file changed (a removal started a new epoch).
    /// Returns false when no agent runs.
    package static func groupChanged(_ directory: DataDirectory) async -> Bool {
        (try? await request(["command": "group-changed"], directory: directory)) != nil
    }

    /// Tells a running agent that the node's groups changed (one was added or left), so that it
    /// serves the groups the node has now. Returns whether an agent took it in hand.
    package static func nodeGroupsChanged(_ directory: DataDirectory) async -> Bool {
        guard let data = try? await request(["command": "groups-changed"], directory: directory),
            let answer = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return false }
        return answer["ok"] as? Bool == true
    }

    /// Asks the running agent to open a pairing window; nil when no agent runs.
    package static func invite(_ directory: DataDirectory, minutes: Int) async -> [String: String]? {
        guard let data = try? await request(["command": "invite", "minutes": "\(minutes)"], directory: directory) else {
            return nil
        }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: String]
    }

    /// Where the agent's pairing window stands; nil when no agent runs.
    package static func inviteStatus(_ directory: DataDirectory) async -> [String: String]? {
        guard let data = try? await request(["command": "invite-status"], directory: directory) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: String]
    }

    /// What the agent recorded about peers when it last ran.
    package static func savedPeers(_ directory: DataDirectory) -> [PeerRecord] {
        PeerDirectory.load(path: directory.path + "/peers.json")
    }
}
