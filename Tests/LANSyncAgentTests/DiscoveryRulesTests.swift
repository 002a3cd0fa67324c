import LANSyncDiscovery
import Testing

@testable import LANSyncAgent

@Suite struct DiscoveryRulesTests {
    @Test func theTXTRecordHoldsTheVersionAndTheGroupTagOnly() {
        let txt = Agent.txtRecord(groupTag: "0bf7c311d61516c8")
        #expect(txt == ["v": "2", "g": "0bf7c311d61516c8"])
    }

    @Test func onlyNodesOfOurGroupWithACommonVersionAreDialed() {
        let tag = "0bf7c311d61516c8"
        #expect(Agent.isCompatibleMember(["v": "2", "g": tag], groupTag: tag))
        #expect(Agent.isCompatibleMember(["v": "1-3", "g": tag], groupTag: tag), "a newer node that still speaks 2")
        #expect(!Agent.isCompatibleMember(["v": "3-4", "g": tag], groupTag: tag), "no version in common")
        #expect(!Agent.isCompatibleMember(["v": "1", "g": tag], groupTag: tag), "an older node (no app tables)")
        #expect(!Agent.isCompatibleMember(["v": "2", "g": "ffffffffffffffff"], groupTag: tag), "another group")
        #expect(!Agent.isCompatibleMember(["g": tag], groupTag: tag), "no version")
        for garbage in ["", "x", "1-", "-1", "3-1", "1-2-3", "99999999"] {
            #expect(!Agent.isCompatibleMember(["v": garbage, "g": tag], groupTag: tag), "v=\(garbage)")
        }
    }

    @Test func instanceNamesAreNeutralAndVary() {
        let names = Set((0..<20).map { _ in Agent.neutralInstanceName() })
        #expect(names.count > 1)
        for name in names { #expect(name.wholeMatch(of: /LANSync [0-9a-f]{4}/) != nil, "\(name)") }
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
