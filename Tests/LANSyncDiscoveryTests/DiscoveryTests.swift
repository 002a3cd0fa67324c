import Testing

@testable import LANSyncDiscovery

// The decisions around Avahi, fed with the events the real daemon produces. The real daemon is
// exercised end to end by the namespace cluster test (LANSyncCLITests/ClusterTests.swift).

private func key(_ name: String, interface: Int32 = 2, ipv6: Bool = false) -> AvahiServiceKey {
    AvahiServiceKey(interface: interface, ipProtocol: ipv6 ? 1 : 0, name: name, type: "_lansync._tcp", domain: "local")
}

private func resolution(
    _ address: String,
    port: Int = 7741,
    interface: Int32 = 2,
    tag: String = "t1"
) -> AvahiResolution {
    AvahiResolution(
        address: address,
        isIPv6: address.contains(":"),
        port: port,
        interface: interface,
        txt: ["v": "1", "g": tag],
        isOurOwn: false
    )
}

@Suite struct ServiceTableTests {
    @Test func mergesAServiceFoundOverIPv4AndIPv6WithIPv4First() throws {
        var table = ServiceTable()
        let first = table.update(key("A", ipv6: true), resolution("fe80::1"))
        guard case .appeared(let v6only) = first else {
            Issue.record("expected appeared, got \(String(describing: first))")
            return
        }
        #expect(v6only.endpoints.map(\.host) == ["fe80::1"])
        #expect(v6only.endpoints[0].isLinkLocalIPv6)
        guard case .appeared(let both) = table.update(key("A"), resolution("10.0.0.5")) else {
            Issue.record("expected appeared")
            return
        }
        #expect(both.endpoints.map(\.host) == ["10.0.0.5", "fe80::1"])
        #expect(both.txt["g"] == "t1")
    }

    @Test func reportsOnlyRealChanges() {
        var table = ServiceTable()
        #expect(table.update(key("A"), resolution("10.0.0.5")) != nil)
        #expect(table.update(key("A"), resolution("10.0.0.5")) == nil, "the same resolution again is no news")
        guard case .appeared(let moved) = table.update(key("A"), resolution("10.0.0.9")) else {
            Issue.record("an address change must be reported")
            return
        }
        #expect(moved.endpoints.map(\.host) == ["10.0.0.9"])
    }

    @Test func leavesOnlyWhenGoneFromEveryInterface() {
        var table = ServiceTable()
        _ = table.update(key("A"), resolution("10.0.0.5"))
        _ = table.update(key("A", ipv6: true), resolution("fe80::1"))
        guard case .appeared(let rest) = table.remove(key("A")) else {
            Issue.record("expected the IPv6 address to remain")
            return
        }
        #expect(rest.endpoints.map(\.host) == ["fe80::1"])
        #expect(table.remove(key("A", ipv6: true)) == .left(name: "A"))
        #expect(table.remove(key("A", ipv6: true)) == nil)
        #expect(table.names.isEmpty)
    }

    @Test func aServiceRemovedBeforeItResolvedIsNoNews() {
        var table = ServiceTable()
        #expect(table.remove(key("B")) == nil)
    }
}

@Suite struct DiscoverySessionTests {
    let advertisement = ServiceAdvertisement(name: "LANSync", port: 7741, txt: ["v": "1", "g": "t1"])

    @Test func browsesAtOnceAndPublishesWhenTheDaemonRuns() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: advertisement)
        #expect(session.handle(.client(.registering)).actions == [.browse])
        #expect(session.status == .running(advertisedAs: nil))
        #expect(session.handle(.client(.running)).actions == [.publish(advertisement)])
        _ = session.handle(.group(.established))
        #expect(session.status == .running(advertisedAs: "LANSync"))
        #expect(session.handle(.client(.running)).actions.isEmpty, "nothing is published twice")
    }

    @Test func aNameCollisionPublishesAvahisAlternative() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: advertisement)
        _ = session.handle(.client(.running))
        let renamed = session.handle(.group(.collision)).actions
        #expect(renamed.count == 1)
        guard case .publish(let second) = renamed.first else {
            Issue.record("expected a publish")
            return
        }
        #expect(second.name == "LANSync #2")
        guard case .publish(let third) = session.handle(.group(.collision)).actions.first else {
            Issue.record("expected a publish")
            return
        }
        // A second collision before the name is established: two nodes that asked for one name
        // would take the same alternatives in step, so a random one.
        let number = third.name.split(separator: "#").last.flatMap { Int($0) }
        #expect(third.name.hasPrefix("LANSync #") && (3...9999).contains(number ?? 0), "\(third.name)")
        _ = session.handle(.group(.established))
        #expect(session.status == .running(advertisedAs: third.name))
        #expect(!session.isFinished, "a collision never stops the node")
        // Once established, the next collision starts again from Avahi's alternative.
        guard case .publish(let fourth) = session.handle(.group(.collision)).actions.first else {
            Issue.record("expected a publish")
            return
        }
        #expect(fourth.name == AvahiConnection.alternativeName(for: third.name))
    }

    @Test func randomAlternativesKeepTheNameAskedFor() {
        for name in ["LANSync", "LANSync #2", "LANSync #12", "Home #b", "Café #٣"] {
            let renamed = DiscoverySession.randomAlternative(for: name)
            let base = renamed[..<renamed.index(renamed.lastIndex(of: "#")!, offsetBy: -1)]
            let expected = name.hasSuffix(" #2") || name.hasSuffix(" #12") ? "LANSync" : name
            #expect(base == expected, "\(name) → \(renamed)")
        }
        let drawn = Set((0..<50).map { _ in DiscoverySession.randomAlternative(for: "LANSync") })
        #expect(drawn.count > 40, "two nodes colliding again rarely draw the same: \(drawn.count) of 50 distinct")
    }

    @Test func aHostNameChangeRepublishesOnceRunningAgain() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: advertisement)
        _ = session.handle(.client(.running))
        _ = session.handle(.group(.established))
        #expect(session.handle(.client(.collision)).actions.isEmpty, "browsing goes on; records are withdrawn")
        #expect(session.handle(.client(.running)).actions == [.publish(advertisement)])
    }

    @Test func losingTheDaemonEndsTheSessionWithAReason() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: nil)
        _ = session.handle(.client(.running))
        _ = session.handle(.client(.failed(code: -23, message: "Daemon connection failed")))
        #expect(session.isFinished)
        guard case .unavailable(let reason) = session.status else {
            Issue.record("expected unavailable")
            return
        }
        #expect(reason.contains("Daemon connection failed"))
    }

    @Test func aDaemonNotYetRunningIsWaitedFor() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: advertisement)
        #expect(session.handle(.client(.connecting)).actions.isEmpty)
        #expect(!session.isFinished)
        #expect(session.handle(.client(.running)).actions == [.browse, .publish(advertisement)])
    }

    @Test func resolvedServicesBecomeChanges() {
        var session = DiscoverySession(serviceType: "_lansync._tcp", advertisement: nil)
        let changes = session.handle(.resolved(key("A"), resolution("10.0.0.5"))).changes
        #expect(changes.count == 1)
        #expect(session.handle(.serviceRemoved(key("A"))).changes == [.left(name: "A")])
    }
}
