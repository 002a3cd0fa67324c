import Foundation
import Testing

/// Pairing by short code between real processes on loopback (mDNS off: the joiner is given the
/// address; the namespace cluster test finds it over mDNS).
@Suite(.serialized) struct PairingCLITests {
    /// Opens a window on `node`'s running agent; returns its code and port.
    static func invite(_ cli: CLI, _ node: String) async throws -> (code: String, port: String) {
        let text = try await cli.ok(["group", "invite", "--no-wait"], node: node)
        let code = text.split(separator: "\n")[0].split(separator: " ")[2]
        let port = text.split(separator: ":").last?.filter(\.isNumber) ?? ""
        return (String(code), String(port))
    }

    @Test func aNewcomerJoinsWithTheShortCodeAndThreeWrongCodesCloseTheWindow() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.device("a")
        try await cli.device("b")
        try await cli.device("mallory")
        try await cli.ok(["group", "create"], node: "a")
        try await cli.ok(["log", "append", "taps", "{\"first\":1}"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        // A device in no group has nothing to invite to.
        let noAgent = try await cli.run(["group", "invite"], node: "b")
        #expect(noAgent.status == 1 && noAgent.stderr.contains("no group"), "\(noAgent.stderr)")

        var (code, port) = try await Self.invite(cli, "a")
        #expect(code.count == 9 && code.contains("-"), "\(code)")
        let wrong = String(code.reversed())
        for attempt in 1...3 {
            let guess = try await cli.run(
                ["group", "join", attempt == 3 ? "0000-0000" : wrong, "--from", "127.0.0.1:\(port)"],
                node: "mallory"
            )
            #expect(guess.status == 1 && guess.stderr.contains("did not match"), "\(guess.stderr)")
        }
        // The window is closed now, even for the right code.
        let late = try await cli.run(["group", "join", code, "--from", "127.0.0.1:\(port)"], node: "b")
        #expect(late.status == 1 && late.stderr.contains("no pairing window is open"), "\(late.stderr)")
        #expect(a.log.contains("pairing: a run failed"))
        #expect(try await cli.run(["group", "show"], node: "mallory").status == 1, "the guesser is in no group")

        // A new window; the newcomer joins and both show each other.
        (code, port) = try await Self.invite(cli, "a")
        let joined = try await cli.ok(["group", "join", code, "--from", "127.0.0.1:\(port)"], node: "b")
        #expect(joined.contains("paired with a (") && joined.contains("joined group"), "\(joined)")
        // The welcome carried the group's member records: before it ever synced, the newcomer
        // lists the inviter with the key it will hold it to.
        #expect(joined.contains("members: a ("), "\(joined)")
        let inviterAsSeenByB = try await #require(
            try MembershipCLITests.members(cli, "b").first { $0["name"] as? String == "a" }
        )
        let inviterAsSeenByA = try await #require(
            try MembershipCLITests.members(cli, "a").first { $0["name"] as? String == "a" }
        )
        #expect(inviterAsSeenByB["key_fingerprint"] as? String != nil)
        #expect(inviterAsSeenByB["key_fingerprint"] as? String == inviterAsSeenByA["key_fingerprint"] as? String)
        #expect(try await cli.entries("b") == 0, "records only: the log arrives by sync")
        #expect(try await cli.ok(["group", "show", "--json"], node: "b").contains(try Self.tag(cli, "a")))
        #expect(a.log.contains("peer.name=b") && a.log.contains("pairing: a device joined"))
        // It is a member: it syncs.
        let b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await cli.entries("b") == 1)
        #expect(a.stop() == 0)
        #expect(b.stop() == 0)
    }

    static func tag(_ cli: CLI, _ node: String) async throws -> String {
        let json = try await cli.ok(["group", "show", "--json"], node: node)
        return String(json.split(separator: "\"")[3])
    }
}
