import Foundation
import LANSyncTestSupport
import Testing

/// Members and removal between real processes on loopback (static peers: the agents dial with
/// the current epoch's key and accept an earlier one). The namespace cluster test does the same
/// over mDNS, where the member with the new key dials the one that was away.
@Suite(.serialized) struct MembershipCLITests {
    static func members(_ cli: CLI, _ node: String) async throws -> [[String: Any]] {
        try await cli.ok(["group", "members", "--json"], node: node).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }

    /// Wipes `node`'s data directory and sets it up again on the same machine (same machine-id,
    /// so the same device ID; a new key and replica), joined with `code`.
    static func reinstall(_ cli: CLI, _ node: String, joining code: String) async throws {
        try FileManager.default.removeItem(atPath: cli.dataDir(node))
        let result = try await cli.run(
            ["init", "--name", node],
            node: node,
            environment: ["LANSYNC_MACHINE_ID_FILE": cli.root + "/machine-id-\(node)"]
        )
        #expect(result.status == 0, "init \(node): \(result.stderr)")
        let joined = try await cli.ok(["group", "join", code], node: node)
        // The join itself says what the members will do, and the fix (it cannot know they will).
        #expect(
            joined.contains("joined group")
                && joined.contains("until one vouches for it: run `lansync group invite` on a member"),
            "\(joined)"
        )
    }

    static func epoch(_ cli: CLI, _ node: String) async throws -> Int {
        let json = try await cli.ok(["group", "show", "--json"], node: node)
        return (try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any])["epoch"] as! Int
    }

    /// a, b, the tablet and d in one group; the tablet is removed on a while d is away. b moves to
    /// the new epoch at once, d when it comes back; the tablet is refused from then on, also after
    /// a reinstall with the old join code, and gets nothing written after its removal.
    @Test func aRemovedDeviceIsRefusedAndTheOthersKeepSyncing() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let code = try await cli.group(of: "a", "b", "tablet", "d")
        try await cli.ok(["log", "append", "taps", "{\"before\":1}"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        var b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        var tablet = try await AgentProcess(cli, node: "tablet", arguments: ["--peer", a.address])
        var d = try await AgentProcess(cli, node: "d", arguments: ["--peer", a.address])
        // Everyone met a: the group pinned every key, and the records reached everyone.
        #expect(
            try await eventually(within: 30) {
                let (a, d) = (try await Self.members(cli, "a").count, try await Self.members(cli, "d").count)
                return a == 4 && d == 4
            }
        )
        for node in ["b", "tablet", "d"] {
            try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: node)
        }
        let listing = try await cli.ok(["group", "members"], node: "a")
        #expect(listing.contains("created the group") && listing.contains("epoch 0; 4 members"), "\(listing)")
        d.stop()

        // Remove the tablet on a (by name), with its agent running.
        let removed = try await cli.ok(["group", "remove", "tablet"], node: "a")
        #expect(
            removed.contains("removed tablet") && removed.contains("epoch 1") && removed.contains("the agent switched"),
            "\(removed)"
        )
        #expect(try await Self.epoch(cli, "a") == 1)
        // b was connected: it gets the new epoch and syncs on.
        #expect(try await eventually(within: 30) { try await Self.epoch(cli, "b") == 1 }, "b: \(b.log.suffix(2_000))")
        try await cli.ok(["log", "append", "taps", "{\"after\":1}"], node: "a")
        #expect(try await eventually(within: 30) { try await cli.entries("b") == 2 }, "b syncs in the new epoch")
        // The tablet is refused and told why; it has nothing written after its removal.
        #expect(
            try await eventually(within: 30) {
                try await cli.ok(["peers"], node: "tablet").contains("was removed from the group")
            }
        )
        #expect(try await cli.entries("tablet") == 1)
        #expect(a.log.contains("was removed from the group"))
        let aMembers = try await Self.members(cli, "a")
        let tabletRecord = try #require(aMembers.first { $0["name"] as? String == "tablet" })
        #expect(tabletRecord["removed_by"] as? String != nil && tabletRecord["removed_in_epoch"] as? Int == 1)

        // d was away: it comes back with the old key, gets the new one from a, and catches up.
        d = try await AgentProcess(cli, node: "d", arguments: ["--peer", a.address])
        #expect(try await eventually(within: 30) { try await Self.epoch(cli, "d") == 1 }, "d: \(d.log.suffix(2_000))")
        #expect(try await eventually(within: 30) { try await cli.entries("d") == 2 })
        #expect(a.log.contains("handed a member that was away the group's new epoch"))

        // Reinstalled with the old join code: same device ID, new key, still refused.
        let tabletDevice = try await cli.status("tablet")["device_id"] as? String
        tablet.stop()
        try await Self.reinstall(cli, "tablet", joining: code)
        #expect(try await cli.status("tablet")["device_id"] as? String == tabletDevice)
        tablet = try await AgentProcess(cli, node: "tablet", arguments: ["--peer", a.address])
        #expect(
            try await eventually(within: 30) {
                try await cli.ok(["peers"], node: "tablet").contains("was removed from the group")
            }
        )
        #expect(try await cli.entries("tablet") == 0, "it learns nothing, old or new")

        // Bad input: unknown device, this device, a removed one again.
        for (target, message) in [
            ("nobody", "no member matches"), ("b", "this is this device"), ("tablet", "no member matches"),
        ] {
            let result = try await cli.run(["group", "remove", target], node: "b")
            #expect(result.status == 1 && result.stderr.contains(message), "\(target): \(result.stderr)")
        }
        #expect(try await Self.epoch(cli, "b") == 1, "a refused removal changes nothing")
        b.stop()
        b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        // A newcomer paired after the removal is in the group's current epoch from the start (the
        // welcome's records say which), knows of the removal, and lists the tablet as removed.
        try await cli.device("e")
        let (short, port) = try await PairingCLITests.invite(cli, "a")
        let joined = try await cli.ok(["group", "join", short, "--from", "127.0.0.1:\(port)"], node: "e")
        #expect(!joined.contains("tablet ("), "\(joined)")
        #expect(try await Self.epoch(cli, "e") == 1)
        let removedAsSeenByE = try await #require(
            try Self.members(cli, "e").first { $0["name"] as? String == "tablet" }
        )
        #expect(removedAsSeenByE["removed_in_epoch"] as? Int == 1)
        for process in [a, b, d, tablet] { #expect(process.stop() == 0) }
    }

    /// A device that comes back with a new key (reinstalled) must be vouched for: refused with
    /// the fix until a member invites it again, then let in.
    @Test func aReinstalledMemberIsVouchedForByInvite() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        let code = try await cli.group(of: "a", "b")
        try await cli.ok(["log", "append", "taps", "{\"x\":1}"], node: "a")
        let a = try await AgentProcess(cli, node: "a")
        var b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        b.stop()
        try await Self.reinstall(cli, "b", joining: code)
        b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        #expect(
            try await eventually(within: 30) {
                try await cli.ok(["peers"], node: "b").contains("presented a new device key")
            }
        )
        #expect(try await cli.entries("b") == 0)
        b.stop()
        let (short, port) = try await PairingCLITests.invite(cli, "a")
        try await cli.ok(["group", "join", short, "--from", "127.0.0.1:\(port)", "--replace"], node: "b")
        b = try await AgentProcess(cli, node: "b", arguments: ["--peer", a.address])
        try await cli.ok(["sync", "--wait", "--peers", "1", "--timeout", "20"], node: "b")
        #expect(try await cli.entries("b") == 1)
        let record = try await #require(try Self.members(cli, "a").first { $0["name"] as? String == "b" })
        #expect(record["via"] as? String == "short code")
        for process in [a, b] { #expect(process.stop() == 0) }
    }
}
