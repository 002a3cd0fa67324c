import Synchronization

/// What this node advertises over mDNS.
package struct ServiceAdvertisement: Sendable, Equatable {
    /// The DNS-SD instance name. On a collision Avahi's alternative ("Name #2") is used instead,
    /// and on a further one before the name is established, a random one ("Name #4817").
    package var name: String
    package var port: Int
    /// TXT record. Keep it free of anything that identifies a person or a device.
    package var txt: [String: String]

    package init(name: String, port: Int, txt: [String: String]) {
        self.name = name
        self.port = port
        self.txt = txt
    }
}

/// One address at which a discovered service listens.
package struct DiscoveredEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// Numeric IPv4 or IPv6 address, without scope.
    package let host: String
    package let port: Int
    /// The interface it was found on: the scope of an IPv6 link-local address.
    package let interface: Int32
    package let isIPv6: Bool

    package init(host: String, port: Int, interface: Int32, isIPv6: Bool) {
        self.host = host
        self.port = port
        self.interface = interface
        self.isIPv6 = isIPv6
    }

    package var isLinkLocalIPv6: Bool { isIPv6 && host.lowercased().hasPrefix("fe80:") }

    /// `10.0.0.5:7741`, or `[fe80::1%eth0]:7741` for a link-local address (the interface by name when known).
    package var description: String {
        guard isIPv6 else { return "\(host):\(port)" }
        guard isLinkLocalIPv6 else { return "[\(host)]:\(port)" }
        return "[\(host)%\(InterfaceName.of(interface) ?? String(interface))]:\(port)"
    }
}

/// A service instance seen on the LAN, merged over the interfaces and IP protocols it was found on.
package struct DiscoveredService: Sendable, Equatable {
    package let name: String
    /// Every address it was resolved to, IPv4 first (they dial without a scope).
    package let endpoints: [DiscoveredEndpoint]
    package let txt: [String: String]
    /// Published by this machine's own daemon for this very process (or another on the same host).
    package let isOurOwn: Bool

    package init(name: String, endpoints: [DiscoveredEndpoint], txt: [String: String], isOurOwn: Bool) {
        self.name = name
        self.endpoints = endpoints
        self.txt = txt
        self.isOurOwn = isOurOwn
    }
}

/// Where discovery stands, for logs and `lansync status`.
package enum DiscoveryStatus: Sendable, Equatable {
    case starting
    /// Browsing; `advertisedAs` is the instance name once our advertisement is established.
    case running(advertisedAs: String?)
    /// The daemon cannot be reached; discovery retries by itself.
    case unavailable(reason: String)
}

/// What to do when a network interface comes up (`MDNSDiscovery.events`).
package enum DiscoveryRefresh: Sendable, Equatable {
    /// Browse afresh: a new browser, so services announced while the link was down are found.
    case browse
    /// Also withdraw and publish the advertisement again, so peers that never heard it hear it
    /// now. Peers that knew it see it leave and come back (and reconnect), so only when no
    /// peer is connected.
    case announceAndBrowse
}

package enum DiscoveryEvent: Sendable, Equatable {
    case status(DiscoveryStatus)
    /// A service appeared, or its addresses or TXT record changed.
    case appeared(DiscoveredService)
    /// A service is gone from every interface (or the daemon connection was lost).
    case left(name: String)
}

/// mDNS / DNS-SD through the system's avahi-daemon.
package enum MDNSDiscovery {
    /// Advertises (when given an advertisement) and browses `serviceType`, as a stream of events.
    /// Survives the daemon being absent, stopping and restarting: it reports `unavailable` once,
    /// retries every `retryInterval`, then publishes and browses again. Ends when the consumer
    /// stops iterating (its task is cancelled); the advertisement is withdrawn then. Each element
    /// of `refreshes` replaces the browser with a new one and, if asked, announces the
    /// advertisement again: send one when a network interface comes up.
    /// `resolvesAgain`: names to resolve again with new resolvers, each `after` it is sent. For a
    /// name our advertisement gave up after a collision: avahi can resolve it to our own withdrawn
    /// record for a while after the rename, and a resolver that did so never reports the peer that
    /// holds the name now. A stream of its own, unbounded, so that link-up refreshes coalesce while
    /// no name is dropped.
    /// `txtUpdates`: new TXT records for the advertisement, applied in place (and used from then
    /// on when the daemon connection is re-established).
    package static func events(
        serviceType: String,
        advertising advertisement: ServiceAdvertisement?,
        retryInterval: Duration = .seconds(2),
        refreshes: AsyncStream<DiscoveryRefresh>? = nil,
        resolvesAgain: (names: AsyncStream<String>, after: Duration)? = nil,
        txtUpdates: AsyncStream<[String: String]>? = nil
    ) -> AsyncStream<DiscoveryEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: DiscoveryEvent.self)
        let current = CurrentConnection()
        current.advertisement.withLock { $0 = advertisement }
        // One task owns the connection's jobs, which end together when the consumer stops.
        let work = Task {
            await withDiscardingTaskGroup { jobs in
                jobs.addTask {
                    await run(serviceType: serviceType, retry: retryInterval, out: continuation, current: current)
                }
                if let refreshes {
                    jobs.addTask { await refreshing(current, on: refreshes, serviceType: serviceType) }
                }
                if let resolvesAgain {
                    jobs.addTask { await resolvingAgain(current, resolvesAgain, serviceType: serviceType) }
                }
                if let txtUpdates {
                    jobs.addTask { await updatingTXT(current, from: txtUpdates) }
                }
            }
        }
        continuation.onTermination = { _ in work.cancel() }
        return stream
    }

    /// Announces again and browses afresh on the connection of the moment, at each refresh.
    private static func refreshing(
        _ current: CurrentConnection,
        on refreshes: AsyncStream<DiscoveryRefresh>,
        serviceType: String
    ) async {
        for await refresh in refreshes {
            let connection = current.connection.withLock { $0 }
            if refresh == .announceAndBrowse { try? connection?.announceAgain() }
            try? connection?.browseAfresh(type: serviceType)
        }
    }

    /// Resolves each given-up name again, and browses afresh, once `after` has passed for it.
    private static func resolvingAgain(
        _ current: CurrentConnection,
        _ resolvesAgain: (names: AsyncStream<String>, after: Duration),
        serviceType: String
    ) async {
        await withDiscardingTaskGroup { group in
            for await name in resolvesAgain.names {
                group.addTask {
                    guard (try? await Task.sleep(for: resolvesAgain.after)) != nil else { return }
                    let connection = current.connection.withLock { $0 }
                    try? connection?.stopResolving(name: name)
                    try? connection?.browseAfresh(type: serviceType)
                }
            }
        }
    }

    /// Applies new TXT records to the advertisement, and keeps them for a re-established connection.
    private static func updatingTXT(_ current: CurrentConnection, from txtUpdates: AsyncStream<[String: String]>) async
    {
        for await txt in txtUpdates {
            current.advertisement.withLock { $0?.txt = txt }
            try? current.connection.withLock { $0 }?.updateTXT(
                txt.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            )
        }
    }

    private static func run(
        serviceType: String,
        retry: Duration,
        out: AsyncStream<DiscoveryEvent>.Continuation,
        current: CurrentConnection
    ) async {
        var last: DiscoveryStatus?
        func report(_ status: DiscoveryStatus) {
            guard status != last else { return }
            last = status
            out.yield(.status(status))
        }
        report(.starting)
        while !Task.isCancelled {
            let (raw, rawContinuation) = AsyncStream.makeStream(of: AvahiEvent.self)
            let connection: AvahiConnection
            do {
                connection = try AvahiConnection(events: rawContinuation)
            } catch {
                report(.unavailable(reason: "avahi-daemon cannot be reached (\(error))"))
                try? await Task.sleep(for: retry)
                continue
            }
            current.connection.withLock { $0 = connection }
            var session = DiscoverySession(
                serviceType: serviceType,
                advertisement: current.advertisement.withLock { $0 }
            )
            for await event in raw {
                let outcome = session.handle(event)
                for action in outcome.actions {
                    do {
                        switch action {
                        case .browse: try connection.browse(type: serviceType)
                        case .publish(let ad):
                            try connection.publish(
                                name: ad.name,
                                type: serviceType,
                                port: UInt16(clamping: ad.port),
                                txt: ad.txt.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                            )
                        }
                    } catch {
                        session.failed("\(error)")
                    }
                }
                if let status = session.status { report(status) }
                for change in outcome.changes { out.yield(change) }
                if session.isFinished { break }
            }
            current.connection.withLock { $0 = nil }
            connection.shutdown()
            for name in session.services.names { out.yield(.left(name: name)) }
            if Task.isCancelled { break }
            try? await Task.sleep(for: retry)
        }
        out.finish()
    }
}

/// The daemon connection in use, for the tasks that refresh its browser and update the TXT
/// record, and the advertisement as it stands (what a new connection publishes).
final class CurrentConnection: Sendable {
    let connection = Mutex<AvahiConnection?>(nil)
    let advertisement = Mutex<ServiceAdvertisement?>(nil)
}

/// The decisions of one connection to the daemon, kept free of Avahi calls so they can be tested:
/// when to browse and publish, which name to use after a collision, which services changed.
struct DiscoverySession {
    enum Action: Equatable {
        case browse
        case publish(ServiceAdvertisement)
    }

    let serviceType: String
    private(set) var advertisement: ServiceAdvertisement?
    private(set) var services = ServiceTable()
    private(set) var status: DiscoveryStatus?
    private(set) var isFinished = false
    private var browsing = false
    private var published = false
    private var established = false
    /// Collisions since our advertisement was last established.
    private var collisions = 0

    init(serviceType: String, advertisement: ServiceAdvertisement?) {
        self.serviceType = serviceType
        self.advertisement = advertisement
    }

    mutating func handle(_ event: AvahiEvent) -> (actions: [Action], changes: [DiscoveryEvent]) {
        var actions: [Action] = []
        var changes: [DiscoveryEvent] = []
        switch event {
        case .client(.registering), .client(.collision):
            // The daemon is (re)registering its host name; it withdraws our records meanwhile.
            // Browsing works already.
            published = false
            established = false
            if !browsing {
                actions.append(.browse)
                browsing = true
            }
            status = .running(advertisedAs: nil)
        case .client(.running):
            if !browsing {
                actions.append(.browse)
                browsing = true
            }
            if let advertisement, !published {
                actions.append(.publish(advertisement))
                published = true
            }
            status = .running(advertisedAs: established ? advertisement?.name : nil)
        case .client(.connecting):
            status = .unavailable(reason: "avahi-daemon is not running; waiting for it to start")
        case .client(.failed(_, let message)):
            status = .unavailable(reason: "lost the connection to avahi-daemon: \(message)")
            isFinished = true
        case .group(.established):
            established = true
            collisions = 0
            status = .running(advertisedAs: advertisement?.name)
        case .group(.collision):
            // Another service on the LAN has our name: take Avahi's alternative and publish again.
            // Two nodes that asked for one name at once both take the same alternative, collide
            // again, and again ("LANSync #15" was seen, tens of seconds unadvertised): after the
            // first collision, a random alternative settles it in one round.
            if var renamed = advertisement {
                collisions += 1
                renamed.name =
                    collisions == 1
                    ? AvahiConnection.alternativeName(for: renamed.name)
                    : Self.randomAlternative(for: renamed.name)
                advertisement = renamed
                actions.append(.publish(renamed))
            }
        case .group(.failed(let message)):
            status = .unavailable(reason: "avahi-daemon refused our advertisement: \(message)")
            isFinished = true
        case .serviceRemoved(let key):
            if let change = services.remove(key) { changes.append(change) }
        case .resolved(let key, let resolution):
            if let change = services.update(key, resolution) { changes.append(change) }
        case .browseFailed(let message):
            status = .unavailable(reason: "browsing failed: \(message)")
            isFinished = true
        }
        return (actions, changes)
    }

    /// "Name #4817" for "Name" or "Name #3": a number from 3 to 9999 that two nodes colliding
    /// again are unlikely to both draw.
    static func randomAlternative(for name: String) -> String {
        var base = Substring(name)
        if let mark = name.lastIndex(of: "#"), mark > name.startIndex,
            name[name.index(before: mark)] == " ",
            case let digits = name[name.index(after: mark)...],
            !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber })
        {
            base = name[..<name.index(before: mark)]
        }
        let renamed = "\(base) #\(Int.random(in: 3...9999))"
        // A DNS label holds 63 bytes; Avahi's alternative shortens the name to fit.
        return renamed.utf8.count <= 63 ? renamed : AvahiConnection.alternativeName(for: name)
    }

    /// A call to the daemon failed: start over with a new connection.
    mutating func failed(_ message: String) {
        status = .unavailable(reason: "avahi-daemon: \(message)")
        isFinished = true
    }
}

/// Service instances by name, each merged over the interfaces and IP protocols it was found on.
struct ServiceTable {
    private var instances: [String: [AvahiServiceKey: AvahiResolution]] = [:]
    private var reported: [String: DiscoveredService] = [:]

    var names: [String] { reported.keys.sorted() }

    /// Records a resolution; returns `.appeared` when what the service looks like changed.
    mutating func update(_ key: AvahiServiceKey, _ resolution: AvahiResolution) -> DiscoveryEvent? {
        instances[key.name, default: [:]][key] = resolution
        return refresh(key.name)
    }

    /// Forgets one instance; returns `.left` when it was the service's last, `.appeared` when the
    /// service lives on with fewer addresses.
    mutating func remove(_ key: AvahiServiceKey) -> DiscoveryEvent? {
        guard instances[key.name]?.removeValue(forKey: key) != nil else { return nil }
        if instances[key.name]?.isEmpty ?? true {
            instances.removeValue(forKey: key.name)
            return reported.removeValue(forKey: key.name) != nil ? .left(name: key.name) : nil
        }
        return refresh(key.name)
    }

    private mutating func refresh(_ name: String) -> DiscoveryEvent? {
        guard let found = instances[name] else { return nil }
        let resolutions = found.sorted { ($0.key.interface, $0.key.ipProtocol) < ($1.key.interface, $1.key.ipProtocol) }
            .map(\.value)
        var endpoints: [DiscoveredEndpoint] = []
        for resolution in resolutions {
            let endpoint = DiscoveredEndpoint(
                host: resolution.address,
                port: resolution.port,
                interface: resolution.interface,
                isIPv6: resolution.isIPv6
            )
            if !endpoints.contains(endpoint) { endpoints.append(endpoint) }
        }
        endpoints.sort { (!$0.isIPv6 ? 0 : 1, $0.interface, $0.host) < (!$1.isIPv6 ? 0 : 1, $1.interface, $1.host) }
        let service = DiscoveredService(
            name: name,
            endpoints: endpoints,
            txt: resolutions.last?.txt ?? [:],
            isOurOwn: resolutions.contains(where: \.isOurOwn)
        )
        guard reported[name] != service else { return nil }
        reported[name] = service
        return .appeared(service)
    }
}

extension MDNSDiscovery {
    /// Whether avahi-daemon answers: nil when it runs, else why not (for `lansync doctor`).
    package static func probe(timeout: Duration = .seconds(2)) async -> String? {
        let (raw, continuation) = AsyncStream.makeStream(of: AvahiEvent.self)
        let connection: AvahiConnection
        do {
            connection = try AvahiConnection(events: continuation)
        } catch {
            return "avahi-daemon cannot be reached (\(error))"
        }
        defer { connection.shutdown() }
        return await withDiscardingTaskGroup { timer in
            timer.addTask {
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                continuation.yield(.client(.failed(code: 0, message: "no answer from avahi-daemon within \(timeout)")))
            }
            defer { timer.cancelAll() }
            for await event in raw {
                switch event {
                case .client(.running), .client(.registering), .client(.collision): return nil
                case .client(.connecting): return "avahi-daemon is not running (D-Bus is up, the daemon is not)"
                case .client(.failed(_, let message)): return message
                default: continue
                }
            }
            return "the connection to avahi-daemon ended"
        }
    }
}
