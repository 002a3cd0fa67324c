import LANSyncCrypto
import LANSyncDiscovery
import LANSyncIdentity
import LANSyncTransport
import Testing

@testable import LANSyncAgent

@Suite struct DiscoveryRulesTests {
    @Test func theTXTRecordHoldsTheVersionAndTheTagsOnly() {
        let tags = (0..<8).map { String(repeating: "\($0)", count: 16) }
        #expect(Agent.txtRecord(tags: tags) == ["v": "5", "g": tags.joined(separator: ",")])
        let many = (0..<30).map { String(format: "%016x", $0) }
        let txt = Agent.txtRecord(tags: many)
        #expect(Set(txt.keys) == ["v", "g", "g2", "g3"], "14 tags to a TXT string")
        #expect(txt.filter { $0.key != "v" }.allSatisfy { ("\($0.key)=\($0.value)").utf8.count <= 255 })
        #expect(AdvertisedTags.parse(txt) == many, "the list reads back in order")
    }

    /// One group's tag among seven decoys: the list is the same size for a node of one group and
    /// one of eight, in steps of eight beyond; decoys look like tags, stay for the period, change
    /// with it, and differ from node to node.
    @Test func theTagListHidesHowManyGroupsANodeServes() {
        let node = AdvertisedTags(staticSecret: KeyPair.generate().secretKey)
        let other = AdvertisedTags(staticSecret: KeyPair.generate().secretKey)
        let groups = (0..<50).map { _ in GroupSecret.generate().advertisedTag(period: 20_415) }
        for (count, listed) in [(1, 8), (2, 8), (8, 8), (9, 16), (50, 56)] {
            let tags = node.tags(groupTags: Array(groups.prefix(count)), period: 20_415)
            #expect(tags.count == listed, "\(count) groups")
            #expect(tags == tags.sorted(), "in ascending order: where a group's tag sits says nothing")
            #expect(Set(tags).isSuperset(of: groups.prefix(count)))
            #expect(tags.allSatisfy { $0.count == 16 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() })
        }
        let group = GroupSecret.generate()
        let today = node.tags(groupTags: [group.advertisedTag(period: 20_415)], period: 20_415)
        #expect(node.tags(groupTags: [group.advertisedTag(period: 20_415)], period: 20_415) == today, "all period")
        let tomorrow = node.tags(groupTags: [group.advertisedTag(period: 20_416)], period: 20_416)
        #expect(Set(tomorrow).intersection(today).isEmpty, "a new tag and new decoys")
        let another = other.tags(groupTags: [group.advertisedTag(period: 20_415)], period: 20_415)
        #expect(Set(another).intersection(today) == [group.advertisedTag(period: 20_415)], "decoys are the node's own")
    }

    /// A record is read as a list of tags: one tag (an earlier release's) reads as a list of one; a
    /// malformed tag anywhere, or no `g`, makes the record unreadable, and so not dialed.
    @Test func tagListsThatDoNotParseAreIgnored() {
        let tag = "0bf7c311d61516c8"
        #expect(AdvertisedTags.parse(["v": "5", "g": tag]) == [tag])
        #expect(
            AdvertisedTags.parse(["v": "5", "g": tag + "," + tag, "g3": tag]) == [tag, tag],
            "g3 without g2: not read"
        )
        for bad in ["", tag + ",", "," + tag, tag.uppercased(), String(tag.dropLast()), tag + "0", tag + " " + tag] {
            #expect(AdvertisedTags.parse(["g": bad]) == nil, "g=\(bad)")
        }
        #expect(AdvertisedTags.parse(["v": "5"]) == nil)
        let tooMany = (0..<(AdvertisedTags.mostTags / 14 + 1)).reduce(into: [String: String]()) { txt, index in
            txt[index == 0 ? "g" : "g\(index + 1)"] = Array(repeating: tag, count: 14).joined(separator: ",")
        }
        #expect(AdvertisedTags.parse(tooMany) == nil, "more than \(AdvertisedTags.mostTags) tags")
        let ours: Set = [tag]
        #expect(Agent.isDialableMember(["v": "5", "g": "1111111111111111," + tag], groupTags: ours))
        #expect(Agent.isDialableMember(["v": "5", "g": "1111111111111111", "g2": tag], groupTags: ours))
        #expect(!Agent.isDialableMember(["v": "5", "g": "1111111111111111,X" + tag.dropFirst()], groupTags: ours))
    }

    /// Nodes of our group are dialed whatever versions they announce (one with none in common
    /// once, to tell it to upgrade); nodes of other groups and records that do not parse are not.
    @Test func nodesOfOurGroupAreDialedAndOthersAreNot() {
        let tag = "0bf7c311d61516c8"
        let tags: Set = [tag, "1111111111111111"]
        #expect(Agent.isDialableMember(["v": "5", "g": tag], groupTags: tags))
        #expect(Agent.isDialableMember(["v": "3-5", "g": tag], groupTags: tags), "a newer node that still speaks 4")
        #expect(
            Agent.isDialableMember(["v": "2-3", "g": tag], groupTags: tags),
            "an older node: dialed once, told to upgrade"
        )
        #expect(!Agent.isDialableMember(["v": "0", "g": tag], groupTags: tags), "no such version")
        #expect(!Agent.isDialableMember(["v": "5", "g": "ffffffffffffffff"], groupTags: tags), "another group")
        #expect(!Agent.isDialableMember(["g": tag], groupTags: tags), "no version")
        for garbage in ["", "x", "1-", "-1", "3-1", "1-2-3", "99999999"] {
            #expect(!Agent.isDialableMember(["v": garbage, "g": tag], groupTags: tags), "v=\(garbage)")
        }
    }

    /// The advertised tag changes every period, differs from the stable tag members are shown, and
    /// is recognised one period either side (midnight, clocks a little apart).
    @Test func theAdvertisedTagRotatesAndNeighbouringPeriodsAreAccepted() {
        let group = GroupSecret.generate()
        let day = GroupSecret.tagPeriod(atSeconds: 1_763_856_000)  // 2025-11-23T00:00:00Z
        #expect(GroupSecret.tagPeriod(atSeconds: 1_763_856_000 - 1) == day - 1)
        #expect(GroupSecret.tagPeriod(atSeconds: -1) == -1)
        #expect(GroupSecret.tagPeriod(atSeconds: 10, length: 4) == 2)
        let tags = (day - 2...day + 2).map { group.advertisedTag(period: $0) }
        #expect(Set(tags).count == 5)
        #expect(!tags.contains(group.tag))
        #expect(tags.allSatisfy { $0.count == 16 && $0.allSatisfy(\.isHexDigit) })
        #expect(group.advertisedTag(period: day) == group.advertisedTag(period: day), "stable within a period")
        let accepted = group.acceptedTags(atSeconds: 1_763_856_000 + 3_600)
        #expect(accepted == Set(tags[1...3]))
        #expect(!accepted.contains(tags[0]) && !accepted.contains(tags[4]))
        #expect(GroupSecret.generate().advertisedTag(period: day) != tags[2], "another group's tag differs")
    }

    @Test func instanceNamesAreNeutralAndVary() {
        let names = Set((0..<20).map { _ in Agent.neutralInstanceName() })
        #expect(names.count > 1)
        for name in names { #expect(name.wholeMatch(of: /LANSync [0-9a-f]{4}/) != nil, "\(name)") }
    }

    /// A member that was away advertises its old epoch's tag: we dial it with that key and hand it
    /// the new epoch, then dial with the current key. If it cannot open that handshake (it never
    /// read the records: the connection was cut first), the next dial hands the epoch over again
    /// rather than knocking with a key it lacks until its record changes (seen under load: a
    /// member that stayed in the old epoch for good).
    @Test func aMemberThatDidNotTakeAHandOverIsHandedItAgain() {
        var state = DiscoveryState()
        let name = "LANSync 4a2f"
        #expect(state.dialEnded(name, outcome: .handedOver(epoch: 1)) == .dialAgain)
        #expect(state.dialWithCurrentEpoch.contains(name), "next: the current key")
        #expect(state.dialEnded(name, outcome: .closedByPeer) == .dialAgain)
        #expect(!state.dialWithCurrentEpoch.contains(name), "next: the key its tag shows, a hand-over again")
        #expect(
            state.dialEnded(name, outcome: .session(.peerSaidGoodbye(code: .notAMember, reason: "reconnect")))
                == .dialAgain
        )
        #expect(state.dialWithCurrentEpoch.contains(name), "it handed us a newer epoch: the current key")
        #expect(state.dialEnded(name, outcome: .session(.peerClosed)) == .dialAgain)
        #expect(state.dialWithCurrentEpoch.contains(name), "a session that ended says nothing about keys")
        #expect(state.dialEnded(name, outcome: .handshakeTimeout) == .dialAgain)
        #expect(!state.dialWithCurrentEpoch.contains(name))
        #expect(state.dialEnded(name, outcome: .notAMember("removed")) == .refusedUntilChanged)
        #expect(state.refusedUntilChanged.contains(name))
        #expect(state.dialEnded("LANSync 0002", outcome: nil) == .dialAgain)
    }

    static func service(_ name: String, at host: String) -> DiscoveredService {
        DiscoveredService(
            name: name,
            endpoints: [DiscoveredEndpoint(host: host, port: 7741, interface: 2, isIPv6: false)],
            txt: [:],
            isOurOwn: false
        )
    }

    /// After a collision renamed us, avahi can still resolve our old name to our own address: a
    /// dial there reaches ourselves, and the name is ours, not a peer counted among the members.
    /// Once a peer takes that name (it resolves elsewhere), it is a peer again.
    @Test func ourOldNameIsNotAPeerUntilItResolvesElsewhere() {
        var state = DiscoveryState()
        state.peers["LANSync 0001"] = Self.service("LANSync 0001", at: "10.47.0.1")
        state.dialReachedOurselves("LANSync 0001", at: "10.47.0.1:7741")
        #expect(state.endpointsToDial("LANSync 0001") == [])
        #expect(state.dialEnded("LANSync 0001", outcome: .connectedToSelf) == .ownAdvertisement)
        #expect(state.ownServices.contains("LANSync 0001"))
        #expect(state.peers["LANSync 0001"] == nil, "our own old name, not a peer")
        let takenAgain = state.nameTakenByPeer(Self.service("LANSync 0001", at: "10.47.0.1"))
        #expect(!takenAgain, "resolving to our address again, it stays ours")
        #expect(state.ownServices.contains("LANSync 0001"))
        let takenByPeer = state.nameTakenByPeer(Self.service("LANSync 0001", at: "10.47.0.3"))
        #expect(takenByPeer)
        #expect(!state.ownServices.contains("LANSync 0001"))
    }

    /// Avahi can resolve our old name to our own withdrawn record on one IP protocol while the
    /// other already resolves to the peer that took the name: the peer's address is still dialed,
    /// and the name counts as a peer (seen in the namespace cluster: a node that never counted
    /// the peer that took its name, because the one address that reached ourselves marked the
    /// whole name as ours).
    @Test func anAddressThatReachedOurselvesLeavesTheNamesOtherAddressesToDial() {
        var state = DiscoveryState()
        let peer = DiscoveredEndpoint(host: "fe80::3", port: 7741, interface: 2, isIPv6: true)
        let ours = DiscoveredEndpoint(host: "10.47.0.2", port: 7741, interface: 2, isIPv6: false)
        state.peers["LANSync"] = DiscoveredService(name: "LANSync", endpoints: [ours, peer], txt: [:], isOurOwn: false)
        state.dialReachedOurselves("LANSync", at: ours.description)
        #expect(state.endpointsToDial("LANSync") == [peer])
        #expect(state.dialEnded("LANSync", outcome: .connectedToSelf) == .dialAgain)
        #expect(state.peers["LANSync"] != nil, "still a peer: its other address is not ours")
        #expect(!state.ownServices.contains("LANSync"))
        state.dialReachedOurselves("LANSync", at: peer.description)
        #expect(state.dialEnded("LANSync", outcome: .connectedToSelf) == .ownAdvertisement)
        #expect(state.peers["LANSync"] == nil, "every address reached ourselves: our own")
    }

    @Test func linkLocalEndpointsCarryTheirInterface() {
        let v6 = DiscoveredEndpoint(host: "fe80::1", port: 7741, interface: 1, isIPv6: true)
        #expect(v6.isLinkLocalIPv6)
        #expect(v6.description == "[fe80::1%lo]:7741", "interface 1 is the loopback")
        #expect(DialEndpoint(v6)?.description == v6.description)
        let v4 = DiscoveredEndpoint(host: "10.47.0.2", port: 7741, interface: 2, isIPv6: false)
        #expect(v4.description == "10.47.0.2:7741")
        #expect(DialEndpoint(DiscoveredEndpoint(host: "not an address", port: 1, interface: 0, isIPv6: false)) == nil)
    }
}
