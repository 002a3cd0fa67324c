import CAvahi
import Glibc

// The only file that touches libavahi-client. Everything unsafe lives here: C callbacks, raw
// pointers, the threaded poll and its lock. The rest of the module sees `AvahiConnection`'s few
// methods and the `AvahiEvent`s it emits.
//
// Threading: Avahi runs its own thread (the threaded poll) and calls our callbacks on it. Calls
// from any other thread take the poll's lock. Callbacks never take the lock and never free the
// client or the poll: they only emit events (and manage resolvers, which is allowed on the poll
// thread). Whoever owns the connection reacts to the events from Swift concurrency.

/// One service instance as Avahi reports it: per interface and IP protocol.
struct AvahiServiceKey: Hashable, Sendable {
    let interface: Int32
    let ipProtocol: Int32
    let name: String
    let type: String
    let domain: String
}

/// One resolution of a service instance: where it listens and what its TXT record says.
struct AvahiResolution: Sendable, Equatable {
    /// Numeric address, without scope.
    let address: String
    let isIPv6: Bool
    let port: Int
    /// Interface index; needed as the scope of IPv6 link-local addresses.
    let interface: Int32
    /// TXT record as key/value pairs (Avahi returns the strings in reverse order; a map does not care).
    let txt: [String: String]
    /// The service is one this machine's daemon publishes for us.
    let isOurOwn: Bool
}

enum AvahiEvent: Sendable {
    enum Client: Sendable, Equatable {
        case registering, running, collision, connecting
        case failed(code: Int32, message: String)
    }
    enum Group: Sendable, Equatable {
        case established, collision, failed(String)
    }

    case client(Client)
    case group(Group)
    case serviceRemoved(AvahiServiceKey)
    case browseFailed(String)
    case resolved(AvahiServiceKey, AvahiResolution)
}

/// Interface names for scoped IPv6 addresses (a libc call; kept with the other C interop).
enum InterfaceName {
    static func of(_ index: Int32) -> String? {
        guard index > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return nil }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

struct AvahiFailure: Error, CustomStringConvertible {
    let code: Int32
    var description: String { String(cString: avahi_strerror(code)) }
}

/// A connection to the avahi-daemon: a threaded poll, a client, at most one entry group (our
/// advertisement) and one service browser with a resolver per service instance found.
///
/// Lifetime: create, use, then call `shutdown()` exactly once from outside any callback. Until then
/// the object must stay referenced (Avahi holds an unretained pointer to it).
final class AvahiConnection: @unchecked Sendable {
    // Unchecked Sendable: every field below is touched either on the poll thread (callbacks) or
    // under the poll's lock, which serialises with that thread; after `shutdown` stops the poll,
    // only the shutting-down thread touches them.
    private let poll: OpaquePointer
    private var client: OpaquePointer?
    private var group: OpaquePointer?
    /// The name and type of the service last published (for TXT updates).
    private var publishedName: String?
    private var publishedType: String?
    /// The port and TXT record published last, to publish again (`announceAgain`).
    private var published: (port: UInt16, txt: [String])?
    private var browser: OpaquePointer?
    private var resolvers: [AvahiServiceKey: OpaquePointer] = [:]
    private let events: AsyncStream<AvahiEvent>.Continuation
    private var isShutDown = false

    /// Starts the poll thread and connects to the daemon. With D-Bus up and no daemon, the client
    /// waits (`connecting`) and runs when the daemon appears; with no D-Bus at all this throws.
    init(events: AsyncStream<AvahiEvent>.Continuation) throws(AvahiFailure) {
        guard let poll = avahi_threaded_poll_new() else { throw AvahiFailure(code: CInt(AVAHI_ERR_NO_MEMORY)) }
        self.poll = poll
        self.events = events
        var error: CInt = 0
        let me = Unmanaged.passUnretained(self).toOpaque()
        // The client callback fires inside avahi_client_new, before it returns: it records the
        // pointer it is given. The poll thread is not started yet, so no lock is needed here.
        let created = avahi_client_new(
            avahi_threaded_poll_get(poll),
            AVAHI_CLIENT_NO_FAIL,
            { client, state, userdata in
                guard let userdata else { return }
                Unmanaged<AvahiConnection>.fromOpaque(userdata).takeUnretainedValue().clientChanged(client, state)
            },
            me,
            &error
        )
        guard let created else {
            avahi_threaded_poll_free(poll)
            throw AvahiFailure(code: error)
        }
        client = created
        guard avahi_threaded_poll_start(poll) >= 0 else {
            avahi_client_free(created)
            avahi_threaded_poll_free(poll)
            throw AvahiFailure(code: CInt(AVAHI_ERR_FAILURE))
        }
    }

    /// Publishes (or re-publishes under a new name) one service with a TXT record.
    func publish(name: String, type: String, port: UInt16, txt: [String]) throws(AvahiFailure) {
        try locked { () throws(AvahiFailure) in
            guard let client else { throw AvahiFailure(code: CInt(AVAHI_ERR_BAD_STATE)) }
            if group == nil {
                group = avahi_entry_group_new(
                    client,
                    { _, state, userdata in
                        guard let userdata else { return }
                        Unmanaged<AvahiConnection>.fromOpaque(userdata).takeUnretainedValue().groupChanged(state)
                    },
                    Unmanaged.passUnretained(self).toOpaque()
                )
                guard group != nil else { throw AvahiFailure(code: avahi_client_errno(client)) }
            } else {
                avahi_entry_group_reset(group)
            }
            var list: UnsafeMutablePointer<AvahiStringList>? = nil
            for item in txt { list = avahi_string_list_add(list, item) }
            defer { avahi_string_list_free(list) }
            let added = avahi_entry_group_add_service_strlst(
                group,
                AvahiIfIndex(AVAHI_IF_UNSPEC),
                AvahiProtocol(AVAHI_PROTO_UNSPEC),
                AvahiPublishFlags(0),
                name,
                type,
                nil,
                nil,
                port,
                list
            )
            guard added >= 0 else { throw AvahiFailure(code: added) }
            let committed = avahi_entry_group_commit(group)
            guard committed >= 0 else { throw AvahiFailure(code: committed) }
            publishedName = name
            publishedType = type
            published = (port, txt)
        }
    }

    /// Withdraws the published service and publishes it again, so the daemon probes and announces
    /// it anew. After our link comes back the daemon (unless configured with use-iff-running)
    /// never noticed it was gone: what it announced meanwhile reached nobody, and a peer that
    /// never heard of us would only find us at its next query, seconds away on its doubling
    /// schedule, where an announcement reaches it at once. Does nothing before the first `publish`.
    func announceAgain() throws(AvahiFailure) {
        let last = try locked { () throws(AvahiFailure) -> (name: String, type: String, port: UInt16, txt: [String])? in
            guard let name = publishedName, let type = publishedType, let published else { return nil }
            return (name, type, published.port, published.txt)
        }
        guard let last else { return }
        try publish(name: last.name, type: last.type, port: last.port, txt: last.txt)
    }

    /// Replaces the TXT record of the published service in place (no withdrawal: peers see the
    /// same service with a new record). Does nothing before the first `publish`.
    func updateTXT(_ txt: [String]) throws(AvahiFailure) {
        try locked { () throws(AvahiFailure) in
            guard let group, let name = publishedName, let type = publishedType else { return }
            var list: UnsafeMutablePointer<AvahiStringList>? = nil
            for item in txt { list = avahi_string_list_add(list, item) }
            defer { avahi_string_list_free(list) }
            let updated = avahi_entry_group_update_service_txt_strlst(
                group,
                AvahiIfIndex(AVAHI_IF_UNSPEC),
                AvahiProtocol(AVAHI_PROTO_UNSPEC),
                AvahiPublishFlags(0),
                name,
                type,
                nil,
                list
            )
            guard updated >= 0 else { throw AvahiFailure(code: updated) }
            published?.txt = txt
        }
    }

    /// Browses for a service type on every interface and IP protocol, resolving each instance found.
    func browse(type: String) throws(AvahiFailure) {
        try locked { () throws(AvahiFailure) in
            guard browser == nil else { return }
            browser = try newBrowser(type: type)
        }
    }

    /// Replaces the browser with a new one, if browsing: a new browser queries the network at
    /// once, where the old one, after our link came back, took seconds to notice services
    /// announced while it was down. Services already known are reported again, and resolvers
    /// are kept.
    func browseAfresh(type: String) throws(AvahiFailure) {
        try locked { () throws(AvahiFailure) in
            guard let old = browser else { return }
            avahi_service_browser_free(old)
            browser = nil
            browser = try newBrowser(type: type)
        }
    }

    /// Frees the resolvers of every instance under a name; the browser starts new ones when it
    /// reports the name again.
    func stopResolving(name: String) throws(AvahiFailure) {
        try locked { () throws(AvahiFailure) in
            for (key, resolver) in resolvers where key.name == name {
                avahi_service_resolver_free(resolver)
                resolvers.removeValue(forKey: key)
            }
        }
    }

    /// Call with the poll locked.
    private func newBrowser(type: String) throws(AvahiFailure) -> OpaquePointer {
        guard let client else { throw AvahiFailure(code: CInt(AVAHI_ERR_BAD_STATE)) }
        let browser = avahi_service_browser_new(
            client,
            AvahiIfIndex(AVAHI_IF_UNSPEC),
            AvahiProtocol(AVAHI_PROTO_UNSPEC),
            type,
            nil,
            AvahiLookupFlags(0),
            { _, interface, ipProtocol, event, name, type, domain, _, userdata in
                guard let userdata else { return }
                Unmanaged<AvahiConnection>.fromOpaque(userdata).takeUnretainedValue().browserEvent(
                    event,
                    interface: interface,
                    ipProtocol: ipProtocol,
                    name: name,
                    type: type,
                    domain: domain
                )
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
        guard let browser else { throw AvahiFailure(code: avahi_client_errno(client)) }
        return browser
    }

    /// The name Avahi suggests after a collision: "LANSync" → "LANSync #2" → "LANSync #3".
    static func alternativeName(for name: String) -> String {
        guard let alternative = avahi_alternative_service_name(name) else { return name + " #2" }
        defer { avahi_free(alternative) }
        return String(cString: alternative)
    }

    /// Stops the poll thread, then frees everything (resolvers, browser, group, client, poll).
    /// Freeing the client withdraws our advertisement. Never call from an Avahi callback.
    func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        avahi_threaded_poll_stop(poll)
        for resolver in resolvers.values { avahi_service_resolver_free(resolver) }
        resolvers.removeAll()
        if let browser { avahi_service_browser_free(browser) }
        browser = nil
        if let group { avahi_entry_group_free(group) }
        group = nil
        if let client { avahi_client_free(client) }
        client = nil
        avahi_threaded_poll_free(poll)
        events.finish()
    }

    // MARK: Callbacks (on the poll thread)

    private func clientChanged(_ client: OpaquePointer?, _ state: AvahiClientState) {
        if self.client == nil { self.client = client }
        switch state {
        case AVAHI_CLIENT_S_REGISTERING: events.yield(.client(.registering))
        case AVAHI_CLIENT_S_RUNNING: events.yield(.client(.running))
        case AVAHI_CLIENT_S_COLLISION: events.yield(.client(.collision))
        case AVAHI_CLIENT_CONNECTING: events.yield(.client(.connecting))
        default:
            let code = avahi_client_errno(client)
            events.yield(.client(.failed(code: code, message: String(cString: avahi_strerror(code)))))
        }
    }

    private func groupChanged(_ state: AvahiEntryGroupState) {
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED: events.yield(.group(.established))
        case AVAHI_ENTRY_GROUP_COLLISION: events.yield(.group(.collision))
        case AVAHI_ENTRY_GROUP_FAILURE:
            events.yield(.group(.failed(String(cString: avahi_strerror(avahi_client_errno(client))))))
        default: break
        }
    }

    private func browserEvent(
        _ event: AvahiBrowserEvent,
        interface: AvahiIfIndex,
        ipProtocol: AvahiProtocol,
        name: UnsafePointer<CChar>?,
        type: UnsafePointer<CChar>?,
        domain: UnsafePointer<CChar>?
    ) {
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, let type, let domain else { return }
            let key = AvahiServiceKey(
                interface: interface,
                ipProtocol: ipProtocol,
                name: String(cString: name),
                type: String(cString: type),
                domain: String(cString: domain)
            )
            if event == AVAHI_BROWSER_NEW {
                startResolving(key)
            } else {
                if let resolver = resolvers.removeValue(forKey: key) { avahi_service_resolver_free(resolver) }
                events.yield(.serviceRemoved(key))
            }
        case AVAHI_BROWSER_FAILURE:
            events.yield(.browseFailed(String(cString: avahi_strerror(avahi_client_errno(client)))))
        default: break
        }
    }

    /// Keeps a resolver per instance for as long as it exists: it reports again when the
    /// instance's address, port or TXT record changes.
    private func startResolving(_ key: AvahiServiceKey) {
        guard resolvers[key] == nil, let client else { return }
        let resolver = avahi_service_resolver_new(
            client,
            key.interface,
            key.ipProtocol,
            key.name,
            key.type,
            key.domain,
            key.ipProtocol,
            AvahiLookupFlags(0),
            { resolver, interface, _, event, _, _, _, _, address, port, txt, flags, userdata in
                guard let userdata else { return }
                let me = Unmanaged<AvahiConnection>.fromOpaque(userdata).takeUnretainedValue()
                guard event == AVAHI_RESOLVER_FOUND, let address else { return }
                me.resolved(resolver, interface: interface, address: address, port: port, txt: txt, flags: flags)
            },
            Unmanaged.passUnretained(self).toOpaque()
        )
        if let resolver { resolvers[key] = resolver }
    }

    private func resolved(
        _ resolver: OpaquePointer?,
        interface: AvahiIfIndex,
        address: UnsafePointer<AvahiAddress>,
        port: UInt16,
        txt: UnsafeMutablePointer<AvahiStringList>?,
        flags: AvahiLookupResultFlags
    ) {
        guard let key = resolvers.first(where: { $0.value == resolver })?.key else { return }
        var text = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
        avahi_address_snprint(&text, text.count, address)
        let numeric = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var pairs: [String: String] = [:]
        var item = txt
        while let current = item {
            let size = Int(avahi_string_list_get_size(current))
            if let bytes = avahi_string_list_get_text(current) {
                let string = String(decoding: UnsafeBufferPointer(start: bytes, count: size), as: UTF8.self)
                if let equals = string.firstIndex(of: "=") {
                    pairs[String(string[..<equals])] = String(string[string.index(after: equals)...])
                } else {
                    pairs[string] = ""
                }
            }
            item = avahi_string_list_get_next(current)
        }
        let resolution = AvahiResolution(
            address: numeric,
            isIPv6: address.pointee.proto == AvahiProtocol(AVAHI_PROTO_INET6),
            port: Int(port),
            interface: interface,
            txt: pairs,
            isOurOwn: flags.rawValue & AVAHI_LOOKUP_RESULT_OUR_OWN.rawValue != 0
        )
        events.yield(.resolved(key, resolution))
    }

    private func locked<T>(_ body: () throws(AvahiFailure) -> T) throws(AvahiFailure) -> T {
        guard !isShutDown else { throw AvahiFailure(code: CInt(AVAHI_ERR_BAD_STATE)) }
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return try body()
    }
}
