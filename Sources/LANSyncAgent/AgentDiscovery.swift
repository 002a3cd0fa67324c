import Foundation
import LANSyncCrypto
import LANSyncDiscovery
import LANSyncIdentity
import LANSyncTransport
import LANSyncWire
import Logging
import NIOCore
import NIOPosix

/// A peer the agent keeps dialing: one a person configured, or one found over mDNS. Both kinds
/// go through the same dial loop and the same one-connection-per-peer rule, so a peer found both
/// ways is still one peer.
enum DialTarget: Sendable {
    case configured(PeerAddress)
    case discovered(serviceName: String)

    var key: String {
        switch self {
        case .configured(let address): return "static:\(address)"
        case .discovered(let name): return "mdns:\(name)"
        }
    }
}

/// One address to dial: a host name or address a person gave, or a numeric address found over
/// mDNS (an IPv6 link-local one carries its interface as scope).
struct DialEndpoint: Sendable, CustomStringConvertible {
    private enum Kind {
        case named(host: String, port: Int)
        case socket(SocketAddress)
    }

    private let kind: Kind
    let description: String

    init(_ address: PeerAddress) {
        kind = .named(host: address.host, port: address.port)
        description = address.description
    }

    init?(_ endpoint: DiscoveredEndpoint) {
        guard var address = try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port) else { return nil }
        if endpoint.isLinkLocalIPv6, case .v6(let v6) = address {
            var raw = v6.address
            raw.sin6_scope_id = UInt32(bitPattern: endpoint.interface)
            address = SocketAddress(raw, host: endpoint.host)
        }
        kind = .socket(address)
        description = endpoint.description
    }

    func connect<Output: Sendable>(
        _ bootstrap: ClientBootstrap,
        channelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> Output {
        switch kind {
        case .named(let host, let port):
            return try await bootstrap.connect(host: host, port: port, channelInitializer: channelInitializer)
        case .socket(let address):
            return try await bootstrap.connect(to: address, channelInitializer: channelInitializer)
        }
    }
}

/// The agent's mDNS bookkeeping.
struct DiscoveryState {
    /// Nil while discovery is off.
    var status: DiscoveryStatus?
    var requestedName: String?
    /// Same-group services of other nodes, by instance name: never one of `ownServices` (`markOwn`).
    var peers: [String: DiscoveredService] = [:]
    /// Instance names of LANSync nodes in other groups (seen, never dialed).
    var otherGroups: Set<String> = []
    /// Our own advertisement, however it reaches us.
    var ownServices: Set<String> = []
    var dialers: [String: (generation: Int, task: Task<Void, Never>)] = [:]
    var generation = 0
    /// Discovered services with a connection up right now.
    var connected: Set<String> = []
    /// Services that left mDNS (and have not come back), with where they were and when they left. A service leaves when
    /// its node stops, but also when our link goes down (our daemon forgets every peer), when the
    /// peer's agent restarts under a new instance name, and, as measured in the namespace cluster,
    /// avahi can then stay blind to the new name for minutes. So a service that left is still
    /// dialed at its last addresses (with backoff) for `rememberLeft`; mDNS is a way to find
    /// peers, not the only proof that they are there.
    var lastKnown: [String: (service: DiscoveredService, left: ContinuousClock.Instant)] = [:]
    /// Services dialed at their last known addresses, until when.
    var revivedUntil: [String: ContinuousClock.Instant] = [:]

    /// Asks discovery to browse afresh (a new browser queries the network at once).
    var refresh: AsyncStream<DiscoveryRefresh>.Continuation?
    /// Asks discovery to resolve a name we gave up again, `resolveGivenUpNameAfter` later.
    var resolveAgain: AsyncStream<String>.Continuation?
    /// Services dialed with the current key although their tag shows an earlier epoch: we handed
    /// the node there the new epoch, or it already held it and handed it to us. Until their
    /// record changes, or a handshake with the current key fails (`dialEnded`).
    var dialWithCurrentEpoch: Set<String> = []
    /// Addresses under a name that led a dial to ourselves, by name: not dialed under it again.
    var reachedOurselves: [String: Set<String>] = [:]
    /// Services this node refused (removed, or a key nobody vouched for): not dialed again until
    /// their record changes (they can still dial us; a vouch or a new key lets them in).
    var refusedUntilChanged: Set<String> = []
    /// Replaces the advertised TXT record (a new tag period, or a new group epoch).
    var updateTXT: AsyncStream<[String: String]>.Continuation?

    /// How long a service that left is still dialed; a link coming up extends that by `redialFor`.
    static let rememberLeft: Duration = .seconds(600)
    static let redialFor: Duration = .seconds(60)
    /// How long after giving up a name we resolve it again, and again after a dial under it
    /// reached ourselves: avahi went on resolving it to our withdrawn record for a while (once
    /// still 3 s after the rename, on one of the two IP protocols).
    static let resolveGivenUpNameAfter: Duration = .seconds(3)

    /// What to do with a discovered service after a dial to it ended.
    enum AfterDial: Equatable {
        case dialAgain
        /// Not dialed again until its record changes (it may still dial us).
        case refusedUntilChanged
        /// Our own advertisement, seen through another interface: never dialed again.
        case ownAdvertisement
    }

    /// What a dial's outcome teaches about a discovered service: which epoch's key the next dial
    /// uses, and whether there is a next dial.
    mutating func dialEnded(_ name: String, outcome: ConnectionError?) -> AfterDial {
        switch outcome {
        case .handedOver?, .session(.peerSaidGoodbye(.notAMember, _))?:
            // Dialed with an earlier epoch's key the tag still showed; the next dial uses the
            // current one (a removed device is refused either way).
            dialWithCurrentEpoch.insert(name)
        case .closedByPeer?, .handshake?, .handshakeTimeout?:
            // It could not open a handshake with the current key: it did not take the epoch we
            // handed it (the connection was cut before it read the records). The next dial uses
            // the key its tag shows again, and so hands the epoch over again.
            dialWithCurrentEpoch.remove(name)
        case .notAMember?, .versionMismatch?:
            // We refused it (removed, a key nobody vouched for, or no protocol version in
            // common): dialing it again changes nothing until it does (an upgrade changes its
            // record).
            refusedUntilChanged.insert(name)
            return .refusedUntilChanged
        case .connectedToSelf?:
            // Our own advertisement under a name we no longer hold (after a collision renamed us,
            // avahi can still resolve the old one to our address, on one IP protocol while the
            // other already resolves to the peer that holds it now): not a peer once every address
            // reached ourselves, until the name resolves elsewhere (`nameTakenByPeer`).
            let addresses = Set((peers[name]?.endpoints ?? []).map(\.description))
            guard addresses.isSubset(of: reachedOurselves[name] ?? []) else { return .dialAgain }
            markOwn(name)
            return .ownAdvertisement
        default: break
        }
        return .dialAgain
    }

    /// A dial to `name` at `address` reached ourselves: that address is not dialed under the name
    /// again; the name's other addresses still are (`dialEnded`).
    mutating func dialReachedOurselves(_ name: String, at address: String) {
        reachedOurselves[name, default: []].insert(address)
    }

    /// A discovered peer's addresses, but those that reached ourselves; nil when it is not a peer.
    func endpointsToDial(_ name: String) -> [DiscoveredEndpoint]? {
        guard let service = peers[name] else { return nil }
        let ourselves = reachedOurselves[name] ?? []
        return service.endpoints.filter { !ourselves.contains($0.description) }
    }

    /// Takes `name` for one of our own advertisement's: never a peer, so never counted as one.
    mutating func markOwn(_ name: String) {
        ownServices.insert(name)
        peers.removeValue(forKey: name)
    }

    /// Whether `service` is a peer's under a name we took for ours because dialing it reached
    /// ourselves: it resolves to addresses other than those. (A collision can hand our old name to
    /// a peer after avahi resolved it to us.) Forgets that the name was ours when so.
    mutating func nameTakenByPeer(_ service: DiscoveredService) -> Bool {
        guard let reached = reachedOurselves[service.name],
            !Set(service.endpoints.map(\.description)).isSubset(of: reached)
        else { return false }
        reachedOurselves[service.name] = nil
        ownServices.remove(service.name)
        return true
    }

    /// The instance name our advertisement is established under, if it is.
    var advertisedAs: String? {
        if case .running(let name)? = status { return name }
        return nil
    }

    var isUnavailable: Bool {
        if case .unavailable? = status { return true }
        return false
    }
}

/// What `lansync status` shows about discovery.
public struct DiscoveryReport: Codable, Sendable, Equatable {
    /// off, starting, running or unavailable.
    public let state: String
    /// The mDNS instance name this node advertises, once avahi-daemon confirmed it.
    public let advertisedAs: String?
    /// Why discovery is off or unavailable, and what to do, when it is.
    public let detail: String?
    /// Nodes of this group found over mDNS.
    public let sameGroup: Int
    /// Nodes of other groups seen over mDNS (never contacted).
    public let otherGroups: Int

    enum CodingKeys: String, CodingKey {
        case state, advertisedAs = "advertised_as", detail, sameGroup = "same_group", otherGroups = "other_groups"
    }
}

extension Agent {
    /// The DNS-SD service type every LANSync node advertises and browses.
    package static let serviceType = "_lansync._tcp"

    /// TXT record: the protocol versions spoken and the tags of the current period
    /// (`AdvertisedTags`: the group's, with decoys), nothing else. A tag is a keyed hash of a
    /// group secret and the period: it tells members apart from strangers without revealing the
    /// secret, holds no device ID or name, and changes every period so the group cannot be
    /// followed from one network to another.
    static func txtRecord(tags: [String]) -> [String: String] {
        let versions = WireProtocol.versions
        let v =
            versions.lowerBound == versions.upperBound
            ? "\(versions.lowerBound)" : "\(versions.lowerBound)-\(versions.upperBound)"
        return AdvertisedTags.txtValues(tags).merging(["v": v]) { tag, _ in tag }
    }

    /// The TXT record to advertise now, for tag periods of `length` seconds: the tags of `groups`
    /// (this agent's group, or every group its process serves) among decoys.
    static func currentTXT(
        groups: [GroupSecret],
        advertisedTags: AdvertisedTags,
        length: Int64,
        at seconds: Double = Date().timeIntervalSince1970
    ) -> [String: String] {
        let period = tagPeriod(length, at: seconds)
        let tags = groups.map { $0.advertisedTag(period: period) }
        return txtRecord(tags: advertisedTags.tags(groupTags: tags, period: period))
    }

    /// The groups this agent advertises: its own, or with several groups in one process (as the
    /// host) every one of them.
    nonisolated var advertisedGroups: [GroupSecret] { router?.all.map(\.group) ?? [group] }

    /// Whether a TXT record announces a node of our group to dial: among its tags one of our
    /// group's (this period or a neighbouring one), and a version range. A node with no version in common is
    /// dialed too, once: the handshake then tells both sides which must upgrade (a version-4 node
    /// learns that this one speaks only version 5), and `lansync peers` shows it; it is not
    /// dialed again until its record changes.
    static func isDialableMember(_ txt: [String: String], groupTags: Set<String>) -> Bool {
        guard let listed = AdvertisedTags.parse(txt), listed.contains(where: groupTags.contains), let v = txt["v"]
        else { return false }
        let parts = v.split(separator: "-", omittingEmptySubsequences: false).map { UInt16($0) }
        guard let low = parts.first ?? nil, let high = parts.count == 2 ? parts[1] : low, low <= high, parts.count <= 2
        else { return false }
        return low >= 1
    }

    /// The tag period a moment falls in (now by default), for periods of `length` seconds.
    static func tagPeriod(_ length: Int64, at seconds: Double = Date().timeIntervalSince1970) -> Int64 {
        GroupSecret.tagPeriod(atSeconds: Int64(seconds.rounded(.down)), length: length)
    }

    /// A neutral instance name: says it is LANSync, nothing about whose device it is; the random
    /// suffix is new on every start and keeps collisions rare.
    static func neutralInstanceName() -> String {
        String(format: "LANSync %04x", UInt16.random(in: .min ... .max))
    }

    /// Advertises this node and dials every same-group node found, until cancelled.
    func discover(port: Int) async {
        let name = configuration.mdnsName ?? Self.neutralInstanceName()
        discovery.requestedName = name
        discovery.status = .starting
        let period = configuration.mdnsTagPeriodSeconds
        let advertisement = ServiceAdvertisement(
            name: name,
            port: port,
            txt: Self.currentTXT(groups: advertisedGroups, advertisedTags: advertisedTags, length: period)
        )
        let (refreshes, refresh) = AsyncStream<DiscoveryRefresh>.makeStream(bufferingPolicy: .bufferingNewest(1))
        discovery.refresh = refresh
        let (resolvesAgain, resolveAgain) = AsyncStream<String>.makeStream()
        discovery.resolveAgain = resolveAgain
        let (txtUpdates, updateTXT) = AsyncStream<[String: String]>.makeStream(bufferingPolicy: .bufferingNewest(1))
        discovery.updateTXT = updateTXT
        let advertisedTags = advertisedTags
        // At each period boundary the advertised tags move on.
        let rotation = Task {
            while !Task.isCancelled {
                let now = Date().timeIntervalSince1970
                let next = Double((Self.tagPeriod(period, at: now) + 1) * period)
                try? await Task.sleep(for: .milliseconds(Int64(max(0, next - now) * 1000) + 1))
                if Task.isCancelled { break }
                updateTXT.yield(
                    Self.currentTXT(groups: self.advertisedGroups, advertisedTags: advertisedTags, length: period)
                )
            }
        }
        defer { rotation.cancel() }
        for await event in MDNSDiscovery.events(
            serviceType: Self.serviceType,
            advertising: advertisement,
            refreshes: refreshes,
            resolvesAgain: (resolvesAgain, after: DiscoveryState.resolveGivenUpNameAfter),
            txtUpdates: txtUpdates
        ) {
            handle(event)
            for other in router?.all ?? [] where other !== self {
                await other.followDiscovery(event, requestedName: name)
            }
        }
        for dialer in discovery.dialers.values { dialer.task.cancel() }
        discovery.dialers.removeAll()
    }

    /// What the host's mDNS found or became, handed to another group's agent of its process: it
    /// dials the nodes that list its group's tag.
    func followDiscovery(_ event: DiscoveryEvent, requestedName: String) {
        discovery.requestedName = requestedName
        handle(event)
    }

    private func handle(_ event: DiscoveryEvent) {
        switch event {
        case .status(let status):
            // Statuses arrive only when they change: one warning when discovery goes away, one
            // notice when it is back.
            let wasUnavailable = discovery.isUnavailable
            let wasAdvertisedAs = discovery.advertisedAs
            discovery.status = status
            switch status {
            case .starting: break
            case .unavailable(let reason):
                if wasUnavailable {
                    logger.debug("mDNS discovery still unavailable", metadata: ["reason": "\(reason)"])
                } else {
                    logger.warning(
                        "mDNS discovery unavailable: \(reason). Syncing with static peers only; retrying until avahi-daemon is back"
                    )
                }
            case .running(let advertisedAs):
                if wasUnavailable { logger.notice("mDNS discovery is back") }
                if let advertisedAs, advertisedAs != wasAdvertisedAs {
                    logger.info(
                        "advertising over mDNS",
                        metadata: ["mdns.name": "\(advertisedAs)", "mdns.type": "\(Self.serviceType)"]
                    )
                    // Renamed: from an earlier name, or, the first time, from the name asked for
                    // (a collision while probing).
                    if let given = wasAdvertisedAs ?? discovery.requestedName, given != advertisedAs {
                        renamed(from: given)
                    }
                }
            }
        case .appeared(let service):
            appeared(service)
        case .left(let name):
            if let service = discovery.peers.removeValue(forKey: name) {
                logger.info("peer left mDNS", metadata: ["mdns.name": "\(name)"])
                discovery.lastKnown[name] = (service, .now)
                discovery.revivedUntil[name] = .now + DiscoveryState.rememberLeft
            }
            discovery.otherGroups.remove(name)
        }
    }

    /// Our advertisement lost its name to a peer's (a collision) and took another. The old name
    /// is no longer ours: a peer holds it now, and is dialed like any other. What avahi resolved
    /// under it so far was our own record, and that resolver never reports the peer's (seen in
    /// the namespace cluster: a node that never counted the peer that took its name), so the name
    /// is resolved again once our withdrawn record has left avahi's cache.
    private func renamed(from old: String) {
        let names = Set([old] + (discovery.requestedName.map { [$0] } ?? []))
        for name in names where name != discovery.advertisedAs {
            discovery.ownServices.remove(name)
            discovery.resolveAgain?.yield(name)
        }
    }

    private func appeared(_ service: DiscoveredService) {
        let name = service.name
        let tags = Set(
            groupState.acceptedTags(
                atSeconds: Int64(Date().timeIntervalSince1970),
                length: configuration.mdnsTagPeriodSeconds
            ).keys
        )
        guard Self.isDialableMember(service.txt, groupTags: tags) else {
            if discovery.otherGroups.insert(name).inserted {
                logger.debug("ignoring a LANSync node of another group", metadata: ["mdns.name": "\(name)"])
            }
            discovery.peers.removeValue(forKey: name)
            return
        }
        discovery.otherGroups.remove(name)
        // Our own: the name our advertisement is established under, or, until it is, the name we
        // asked for. Not the asked-for name after a collision renamed us: a peer holds it then,
        // and the own flag of our earlier resolution of it can linger in what avahi reports (seen
        // under load: a node that never counted the peer that took its name).
        if service.isOurOwn && name == (discovery.advertisedAs ?? discovery.requestedName) {
            discovery.markOwn(name)
        }
        guard !discovery.ownServices.contains(name) || discovery.nameTakenByPeer(service) else { return }
        let previous = discovery.peers[name]
        discovery.peers[name] = service
        if previous.flatMap({ AdvertisedTags.parse($0.txt) }) != AdvertisedTags.parse(service.txt) {
            discovery.dialWithCurrentEpoch.remove(name)
        }
        if discovery.refusedUntilChanged.contains(name) {
            guard previous?.txt != service.txt else { return }
            discovery.refusedUntilChanged.remove(name)
        }
        let wasAway = discovery.lastKnown.removeValue(forKey: name) != nil
        discovery.revivedUntil.removeValue(forKey: name)
        if wasAway, closeConnection(to: .discovered(serviceName: name)) {
            // It left mDNS and came back (a link down and up, on its side or ours) while a connection
            // stayed open: that connection may be stuck in TCP retransmission backoff for seconds.
            // A fresh one syncs at once.
            logger.info("peer is back on the network; reconnecting", metadata: ["mdns.name": "\(name)"])
        }
        // A static peer at the same address is already dialed by its own loop: one peer, one loop.
        let configured = Set(configuration.staticPeers.map(\.description))
        if service.endpoints.contains(where: { configured.contains($0.description) }) { return }
        let addresses = service.endpoints.map(\.description).joined(separator: " ")
        if let dialer = discovery.dialers[name] {
            // The loop picks up new addresses at its next dial. An address that went away (the peer
            // moved) restarts it at once, unless it is connected: a live connection is kept.
            let moved = !Set(previous?.endpoints ?? []).isSubset(of: Set(service.endpoints))
            logger.debug(
                "a peer's mDNS record changed",
                metadata: ["mdns.name": "\(name)", "peer.addresses": "\(addresses)"]
            )
            guard moved, !discovery.connected.contains(name) else { return }
            dialer.task.cancel()
        } else {
            logger.info("found a peer over mDNS", metadata: ["mdns.name": "\(name)", "peer.addresses": "\(addresses)"])
        }
        startDialer(name)
    }

    private func startDialer(_ name: String) {
        discovery.generation += 1
        let generation = discovery.generation
        let task = Task {
            await self.dialLoop(.discovered(serviceName: name))
            self.dialerEnded(name, generation: generation)
        }
        discovery.dialers[name] = (generation, task)
    }

    /// Our network came back: browse afresh (peers announced while it was down are found in
    /// milliseconds, not seconds), and dial peers that left mDNS while it was down (our daemon
    /// dropped them with the link) at once at their last known addresses, for `redialFor`.
    func redialPeersThatLeft() {
        // With no peer connected, announce ourselves again too: our daemon may have announced us
        // while the link was down (it often does not notice a link that drops), and then nobody
        // heard it; a peer that never met us would find us only at its next query, seconds away.
        discovery.refresh?.yield(sessions.isEmpty ? .announceAndBrowse : .browse)
        let now = ContinuousClock.now
        for (name, known) in discovery.lastKnown {
            guard now - known.left < DiscoveryState.rememberLeft else {
                discovery.lastKnown.removeValue(forKey: name)
                continue
            }
            guard discovery.peers[name] == nil, !discovery.ownServices.contains(name) else { continue }
            discovery.revivedUntil[name] = max(discovery.revivedUntil[name] ?? now, now + DiscoveryState.redialFor)
            if discovery.dialers[name] == nil {
                logger.info(
                    "redialing a peer that left mDNS while the network was down",
                    metadata: ["mdns.name": "\(name)"]
                )
                startDialer(name)
            }
        }
    }

    private func dialerEnded(_ name: String, generation: Int) {
        if discovery.dialers[name]?.generation == generation { discovery.dialers.removeValue(forKey: name) }
    }

    /// Where to dial a target now; nil once a discovered peer has left.
    func dialEndpoints(_ target: DialTarget) -> [DialEndpoint]? {
        switch target {
        case .configured(let address): return [DialEndpoint(address)]
        case .discovered(let name):
            if let endpoints = discovery.endpointsToDial(name) { return endpoints.compactMap(DialEndpoint.init) }
            guard let until = discovery.revivedUntil[name], ContinuousClock.now < until,
                let known = discovery.lastKnown[name]
            else { return nil }
            return known.service.endpoints.compactMap(DialEndpoint.init)
        }
    }

    /// The handshake keys to dial a target with: for a node found advertising an earlier epoch's
    /// tag (a member that was away during a removal), that epoch's key; else the current one.
    func dialKeys(_ target: DialTarget) -> [(epoch: UInt64, key: SecureBytes)] {
        let current = [groupState.currentPSK]
        guard case .discovered(let name) = target, !discovery.dialWithCurrentEpoch.contains(name),
            let txt = (discovery.peers[name] ?? discovery.lastKnown[name]?.service)?.txt,
            let listed = AdvertisedTags.parse(txt)
        else { return current }
        let accepted = groupState.acceptedTags(
            atSeconds: Int64(Date().timeIntervalSince1970),
            length: configuration.mdnsTagPeriodSeconds
        )
        guard let epoch = listed.compactMap({ accepted[$0] }).max(), let key = groupState.psk(epoch: epoch) else {
            return current
        }
        return [key]
    }

    /// The group moved to another epoch: advertise its tag.
    func advertiseCurrentEpoch() async {
        guard isHost else {
            // The host advertises every group's tag.
            await router?.host?.advertiseCurrentEpoch()
            return
        }
        discovery.updateTXT?.yield(
            Self.currentTXT(
                groups: advertisedGroups,
                advertisedTags: advertisedTags,
                length: configuration.mdnsTagPeriodSeconds
            )
        )
    }

    func dialing(_ target: DialTarget, connected: Bool) {
        guard case .discovered(let name) = target else { return }
        if connected { discovery.connected.insert(name) } else { discovery.connected.remove(name) }
    }

    var discoveryReport: DiscoveryReport {
        let state: String
        var detail: String? = nil
        switch discovery.status {
        case nil: state = "off"
        case .starting?: state = "starting"
        case .running?: state = "running"
        case .unavailable(let reason)?:
            state = "unavailable"
            detail = reason
        }
        return DiscoveryReport(
            state: state,
            advertisedAs: discovery.advertisedAs,
            detail: detail,
            sameGroup: discovery.peers.count,
            otherGroups: discovery.otherGroups.count
        )
    }
}
