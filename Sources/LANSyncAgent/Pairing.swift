import Foundation
package import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncIdentity
import LANSyncPairing
import LANSyncTransport
import LANSyncWire
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization

/// Pairing by short code over the network (protocol §10): the inviting agent's window — a TCP
/// listener and an `_lansync-pair._tcp` advertisement while it is open — and the joining
/// device's client. The protocol itself is `LANSyncPairing`'s pure state machines; this file
/// moves their messages.
enum PairingNetwork {
    static let serviceType = "_lansync-pair._tcp"
}

/// A pairing window the agent opened (`lansync group invite`): the window's count, and what to
/// stop when it closes.
final class OpenPairingWindow: Sendable {
    let state: Mutex<PairingWindow>
    let listener: NIOAsyncChannel<FramedChannel, Never>
    let port: Int
    /// The window's one task: its advertisement, its runs and its expiry (`start`).
    private let life = Mutex<Task<Void, Never>?>(nil)

    init(window: PairingWindow, listener: NIOAsyncChannel<FramedChannel, Never>, port: Int) {
        state = Mutex(window)
        self.listener = listener
        self.port = port
    }

    /// Runs `body` as the window's life, until it returns or `end` cancels it.
    func start(_ body: @escaping @Sendable () async -> Void) {
        life.withLock { $0 = Task { await body() } }
    }

    /// Closes the window: no new runs; runs under way finish, then its task ends.
    func close() {
        listener.channel.close(promise: nil)
    }

    /// Closes the window once its time, its attempts or its one join are spent.
    func closeIfOver() {
        if state.withLock({ $0.closedReason(now: UInt64(Date().timeIntervalSince1970 * 1000)) }) != nil { close() }
    }

    /// Ends the window now, runs under way too (the agent stops).
    func end() {
        close()
        life.withLock { $0?.cancel() }
    }
}

extension Agent {
    /// Opens a pairing window for `minutes` (replacing one that is open) and returns its code,
    /// port and closing time (ms since the epoch).
    func openPairingWindow(minutes: Int) async throws -> (code: String, port: Int, closesAt: UInt64) {
        pairingWindow?.close()
        let code = PairingCode.generate()
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        let window = PairingWindow(code: code, openedAt: now, minutes: minutes)
        let host = configuration.listenHost == "::" ? "0.0.0.0" : configuration.listenHost
        let listener = try await ServerBootstrap(group: eventLoops)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: 0) { channel in
                channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
            }
        let port = listener.channel.localAddress?.port ?? 0
        let advertisement = ServiceAdvertisement(name: Self.neutralInstanceName(), port: port, txt: ["v": "1"])
        let open = OpenPairingWindow(window: window, listener: listener, port: port)
        pairingWindow = open
        logger.notice("pairing window open", metadata: ["pairing.port": "\(port)", "pairing.minutes": "\(minutes)"])
        let secret = group.secret
        let me = (node.deviceID, node.identity.name)
        let logger = logger
        let node = node
        let discovery = configuration.discovery
        let closesAt = ContinuousClock.now + .seconds(minutes * 60)
        // Advertising and the expiry last as long as the listener: until the window closes (its
        // time is up, its attempts are spent, another window replaces it) and its runs under way
        // have finished, or the agent stops (`end`).
        open.start {
            await withDiscardingTaskGroup { life in
                life.addTask {
                    guard discovery else { return }
                    for await _ in MDNSDiscovery.events(
                        serviceType: PairingNetwork.serviceType,
                        advertising: advertisement
                    ) {}
                }
                life.addTask {
                    try? await Task.sleep(until: closesAt)
                    open.close()
                }
                await Self.serveRuns(of: open, code: code, secret: secret, me: me, node: node, logger: logger)
                life.cancelAll()
            }
        }
        return (
            PairingCode.parse(code).map { String($0.prefix(4)) + "-" + String($0.suffix(4)) } ?? code, port,
            window.closesAt
        )
    }

    /// Takes the window's connections until its listener closes: a run on each while the window
    /// allows one, a refusal with its reason otherwise. Returns once the runs under way are over.
    private static func serveRuns(
        of open: OpenPairingWindow,
        code: String,
        secret: SecureBytes,
        me: (DeviceID, String),
        node: LANSyncNode,
        logger: Logger
    ) async {
        try? await open.listener.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { runs in
                for try await connection in inbound {
                    let now = UInt64(Date().timeIntervalSince1970 * 1000)
                    guard open.state.withLock({ $0.startRun(now: now) }) else {
                        let reason = open.state.withLock { $0.closedReason(now: now) } ?? "the window is closed"
                        try? await connection.executeThenClose { _, outbound in
                            try await outbound.write(
                                ByteBuffer(bytes: PairingMessage.refused(reason: reason).encoded())
                            )
                        }
                        continue
                    }
                    runs.addTask {
                        let records = Self.welcomeRecords((try? node.records()) ?? [])
                        let outcome = await Self.invite(
                            connection,
                            code: code,
                            secret: secret,
                            records: records,
                            me: me
                        )
                        open.state.withLock { $0.finishRun(outcome) }
                        switch outcome {
                        case .invited(let device)?:
                            logger.notice(
                                "pairing: a device joined",
                                metadata: ["peer.name": "\(device.name)", "peer.device": "\(device.device)"]
                            )
                            // This member vouches for it: the group pins the key it presents first
                            // (a reinstalled or removed device is let back in this way).
                            try? await node.vouch(for: device.device, name: device.name, at: Int64(now))
                        case .failed(let reason, _)?:
                            logger.warning(
                                "pairing: a run failed: \(reason)",
                                metadata: ["pairing.attempts_left": "\(open.state.withLock { $0.attemptsLeft })"]
                            )
                        default:
                            logger.warning("pairing: a run ended before it finished")
                        }
                        open.closeIfOver()
                    }
                }
            }
        }
    }

    /// Where the pairing window stands, for `lansync group invite` waiting on it.
    func pairingStatus() -> [String: String] {
        guard let open = pairingWindow else { return ["state": "none"] }
        let window = open.state.withLock { $0 }
        let now = UInt64(Date().timeIntervalSince1970 * 1000)
        var status = ["attempts_left": "\(window.attemptsLeft)", "failures": window.failures.joined(separator: "; ")]
        if let joined = window.joined {
            status["state"] = "joined"
            status["name"] = joined.name
            status["device_id"] = joined.device.description
        } else if let reason = window.closedReason(now: now) {
            status["state"] = "closed"
            status["reason"] = reason
        } else {
            status["state"] = "open"
        }
        return status
    }

    /// The member records a welcome carries, most needed first (a welcome holds up to 64 KiB;
    /// what does not fit reaches the newcomer by sync): removals, then who is a member, then
    /// which keys members saw.
    nonisolated static func welcomeRecords(_ records: [PreferenceWrite]) -> [PreferenceWrite] {
        let order = [MemberKeys.epochPrefix, MemberKeys.memberPrefix, MemberKeys.seenPrefix]
        func rank(_ record: PreferenceWrite) -> Int { order.firstIndex { record.key.hasPrefix($0) } ?? order.count }
        return records.sorted { (rank($0), $0.key) < (rank($1), $1.key) }
    }

    /// One run as the inviter, on one connection. Nil when the connection ended first.
    static func invite(
        _ connection: FramedChannel,
        code: String,
        secret: SecureBytes,
        records: [PreferenceWrite],
        me: (DeviceID, String)
    ) async -> PairingOutcome? {
        try? await connection.executeThenClose { inbound, outbound in
            // A run that does not finish within 30 s has given up.
            try await withThrowingTaskGroup(of: PairingOutcome?.self) { tasks in
                tasks.addTask {
                    var inviter = PairingInviter(
                        code: PairingCode.parse(code) ?? code,
                        secret: secret,
                        records: records,
                        device: me.0,
                        name: me.1
                    )
                    for try await frame in inbound {
                        let step: PairingStep
                        if let message = try? PairingMessage.decode(Array(frame.readableBytesView)) {
                            step = inviter.receive(message)
                        } else {
                            let reason = "a malformed pairing message"
                            step = PairingStep(
                                send: .refused(reason: reason),
                                outcome: .failed(reason: reason, wrongCode: false)
                            )
                        }
                        if let send = step.send { try await outbound.write(ByteBuffer(bytes: send.encoded())) }
                        if let outcome = step.outcome { return outcome }
                    }
                    return nil
                }
                tasks.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return .failed(reason: "the joining device took too long", wrongCode: false)
                }
                let first = try await tasks.next() ?? nil
                tasks.cancelAll()
                return first
            }
        } ?? nil
    }
}

/// The joining device's side: find an open pairing window (over mDNS, or at an address given),
/// run CPace with the code, and return the group secret and who invited us.
package enum PairingClient {
    package struct Joined: Sendable {
        package let joinCode: String
        package let inviterName: String
        package let inviterDevice: String
        /// The group's member records the inviter sealed into its welcome.
        package let records: [PreferenceWrite]
    }

    /// Tries each inviting device found within `timeout` seconds (or the one at `address`).
    ///
    /// A window that closed a moment ago can still be in this machine's mDNS cache while a new
    /// one is being announced (a member ran `group invite` again): a window found closed does not
    /// end the search, which goes on for the rest of `timeout`, skipping the addresses tried.
    package static func join(
        code: String,
        device: DeviceID,
        name: String,
        address: String?,
        timeout: Double
    ) async throws(LANSyncError) -> Joined {
        guard let digits = PairingCode.parse(code) else {
            throw LANSyncError(.invalidInput, "\(code) is not a short code (8 digits, like 4821-3907)")
        }
        if let address {
            guard let peer = PeerAddress(address) else {
                throw LANSyncError(.invalidInput, "--from \(address) is not HOST:PORT")
            }
            return try await joinFirst(of: [DialEndpoint(peer)], digits: digits, device: device, name: name).mapError(
                \.error
            ).get()
        }
        let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
        var tried: Set<String> = []
        var lastProblem: LANSyncError?
        while case let left = deadline - ContinuousClock.now, left > .zero {
            let targets = await browse(within: left, excluding: tried)
            if targets.isEmpty { break }
            tried.formUnion(targets.map { $0.description })
            switch await joinFirst(of: targets, digits: digits, device: device, name: name) {
            case .success(let joined): return joined
            case .failure(let failure) where failure.wrongCode: throw failure.error
            case .failure(let failure): lastProblem = failure.error
            }
        }
        if let lastProblem { throw lastProblem }
        throw LANSyncError(
            .invalidInput,
            "found no device with an open pairing window on this network within \(Int(timeout)) s; on a member run "
                + "`lansync group invite` (its agent must be running), check both are on the same network, or give --from HOST:PORT"
        )
    }

    /// Why no target joined; a wrong code ends the search (it costs the window an attempt).
    struct JoinFailure: Error {
        let error: LANSyncError
        let wrongCode: Bool
    }

    /// Runs the pairing with each target in turn until one joins; a wrong code ends the search.
    static func joinFirst(
        of targets: [DialEndpoint],
        digits: String,
        device: DeviceID,
        name: String
    ) async -> Result<Joined, JoinFailure> {
        var lastProblem = "no device answered"
        for target in targets {
            switch await run(digits: digits, device: device, name: name, endpoint: target) {
            case .joined(let secret, let records, let inviter):
                let group = GroupSecret(secret: SecureBytes(copying: secret))
                return .success(
                    Joined(
                        joinCode: group.joinCode,
                        inviterName: inviter.name,
                        inviterDevice: inviter.device.description,
                        records: records
                    )
                )
            case .failed(let reason, let wrongCode):
                if wrongCode {
                    return .failure(
                        JoinFailure(
                            error: LANSyncError(
                                .invalidInput,
                                "the code did not match the one the inviting device shows; check it and try again (its window "
                                    + "closes after \(PairingWindow.maxAttempts) attempts)"
                            ),
                            wrongCode: true
                        )
                    )
                }
                lastProblem = reason
            case .invited:
                break
            }
        }
        return .failure(
            JoinFailure(error: LANSyncError(.invalidInput, "pairing failed: \(lastProblem)"), wrongCode: false)
        )
    }

    /// The addresses of the pairing windows found over mDNS within `timeout`, IPv4 first, but
    /// for those in `excluding` (tried already). Once one is found, a moment more gathers its
    /// other addresses (and other windows open at once).
    static func browse(within timeout: Duration, excluding: Set<String> = []) async -> [DialEndpoint] {
        await withTaskGroup(of: [DialEndpoint].self) { tasks in
            tasks.addTask {
                let state = BrowseState()
                let events = MDNSDiscovery.events(serviceType: PairingNetwork.serviceType, advertising: nil)
                await withTaskGroup(of: Void.self) { inner in
                    inner.addTask {
                        for await event in events {
                            if case .appeared(let service) = event, service.txt["v"] == "1", !service.isOurOwn,
                                service.endpoints.compactMap(DialEndpoint.init).contains(where: {
                                    !excluding.contains($0.description)
                                })
                            {
                                state.found.withLock { $0[service.name] = service }
                                state.deadline.withLock { $0 = $0 ?? .now + .milliseconds(500) }
                            }
                        }
                    }
                    inner.addTask {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: .milliseconds(50))
                            if let due = state.deadline.withLock({ $0 }), ContinuousClock.now >= due { return }
                        }
                    }
                    await inner.next()
                    inner.cancelAll()
                }
                let services = state.found.withLock { Array($0.values) }
                return services.flatMap { service in
                    (service.endpoints.filter { !$0.isIPv6 } + service.endpoints.filter(\.isIPv6)).compactMap(
                        DialEndpoint.init
                    )
                }.filter { !excluding.contains($0.description) }
            }
            tasks.addTask {
                try? await Task.sleep(for: timeout)
                return []
            }
            let first = await tasks.next() ?? []
            tasks.cancelAll()
            return first
        }
    }

    /// What a browse found so far, shared by its two tasks.
    final class BrowseState: Sendable {
        let found = Mutex<[String: DiscoveredService]>([:])
        let deadline = Mutex<ContinuousClock.Instant?>(nil)
    }

    static func run(digits: String, device: DeviceID, name: String, endpoint: DialEndpoint) async -> PairingOutcome {
        do {
            var joiner = try PairingJoiner(code: digits, device: device, name: name)
            let channel = try await endpoint.connect(
                ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(.seconds(5))
            ) { channel in
                channel.eventLoop.makeCompletedFuture { try FramedChannel.framing(channel) }
            }
            return try await channel.executeThenClose { inbound, outbound in
                try await outbound.write(ByteBuffer(bytes: joiner.hello.encoded()))
                for try await frame in inbound {
                    guard let message = try? PairingMessage.decode(Array(frame.readableBytesView)) else {
                        return .failed(reason: "the inviting device sent a malformed message", wrongCode: false)
                    }
                    let step = joiner.receive(message)
                    if let send = step.send { try await outbound.write(ByteBuffer(bytes: send.encoded())) }
                    if let outcome = step.outcome { return outcome }
                }
                return .failed(reason: "the inviting device closed the connection", wrongCode: false)
            }
        } catch {
            if "\(error)".contains("Connection refused") {
                return .failed(
                    reason: "no pairing window is open at \(endpoint) (it closes once a device joined, after "
                        + "\(PairingWindow.maxAttempts) attempts, or when its time is up: run `lansync group invite` again)",
                    wrongCode: false
                )
            }
            return .failed(reason: "could not reach \(endpoint) (\(error))", wrongCode: false)
        }
    }
}
