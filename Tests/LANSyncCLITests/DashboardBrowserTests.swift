import Foundation
import LANSyncTestSupport
import Testing

/// The dashboard in a real browser (headless Chromium, from Debian, installed by scripts/setup):
/// the one-time link opens a session, the group page shows a running two-node group's peer in
/// sync, and a chart's bars are the entries, counted per day by device and by a payload field.
@Suite(.serialized) struct DashboardBrowserTests {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// The page as the browser built it (`--dump-dom`), in a profile that keeps cookies between calls.
    static func dom(_ url: String, profile: String) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium!)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile)", "--dump-dom",
            url,
        ]
        return try await process.runCapturingOutput().stdout
    }

    /// Every bar segment of the chart titled `title`: (day, group) → count.
    static func bars(in dom: String, chart title: String) -> [String: Int] {
        guard let start = dom.range(of: "data-title=\"\(title)\"") else { return [:] }
        let chart = dom[start.upperBound...]
        let end = chart.range(of: "</figure>")?.lowerBound ?? chart.endIndex
        var bars: [String: Int] = [:]
        let pattern = try! NSRegularExpression(
            pattern: "data-day=\"([^\"]+)\" data-group=\"([^\"]+)\" data-count=\"([0-9]+)\""
        )
        let text = String(chart[..<end])
        for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let part = { (index: Int) in String(text[Range(match.range(at: index), in: text)!]) }
            bars[part(1) + " " + part(2), default: 0] += Int(part(3))!
        }
        return bars
    }

    @Test(.enabled(if: chromium != nil, "no chromium: run scripts/setup, which installs it"))
    func theDashboardShowsTheGroupAndChartsTheEntries() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.group(of: "home", "therapy")
        for caregiver in ["mum", "mum", "mum"] {
            try await cli.ok(
                ["log", "append", "taps", "{\"symbol\":\"more\",\"caregiver\":\"\(caregiver)\"}"],
                node: "home"
            )
        }
        for caregiver in ["dad", "dad"] {
            try await cli.ok(
                ["log", "append", "taps", "{\"symbol\":\"help\",\"caregiver\":\"\(caregiver)\"}"],
                node: "therapy"
            )
        }
        let home = try await AgentProcess(cli, node: "home")
        defer { home.stop() }
        let therapy = try await AgentProcess(cli, node: "therapy", arguments: ["--peer", home.address])
        defer { therapy.stop() }
        #expect(
            await eventually(within: 60) {
                let entries = try? await cli.entries("home")
                let (home, therapy) = (try? await cli.digest("home"), try? await cli.digest("therapy"))
                return entries == 5 && home == therapy
            }
        )
        let profile = cli.root + "/browser"
        let link = try await cli.ok(["dashboard"], node: "home").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(link.hasPrefix("http://127.0.0.1:") && link.contains("/login?code="))

        // The link signs the browser in and lands on the group page: the peer, connected and in sync.
        var group = try await Self.dom(link, profile: profile)
        if !group.contains("In sync with all 1 connected peer") {
            // The peers' digests are announced every few seconds: the page refreshes; so do we.
            _ = await eventually(within: 30) {
                group =
                    (try? await Self.dom(link.components(separatedBy: "/login")[0] + "/dashboard/", profile: profile))
                    ?? ""
                return group.contains("In sync with all 1 connected peer")
            }
        }
        #expect(group.contains("<title>Group · LANSync</title>"), "\(group.prefix(400))")
        #expect(group.contains(">therapy<"), "the peer's name")
        #expect(group.contains("<span class=\"ok\">connected</span>"))
        #expect(group.contains("In sync with all 1 connected peer"))
        // The group's members, for a caregiver who has no terminal: both devices, who created the group.
        #expect(
            group.contains("<h2>Members</h2>") && group.contains("created the group")
                && group.contains("Group epoch 0"),
            "\(group)"
        )

        // The stream's charts: per day by device, and by caregiver, exactly the entries.
        let base = link.components(separatedBy: "/login")[0]
        let stream = try await Self.dom(base + "/dashboard/streams/taps?field=caregiver&days=7", profile: profile)
        let today = ISO8601DateFormatter().string(from: Date()).prefix(10)
        let byDevice = Self.bars(in: stream, chart: "Entries per day by device")
        #expect(byDevice.count == 2, "\(byDevice)")
        #expect(byDevice.filter { $0.key.hasPrefix("\(today) home (") }.values.first == 3, "\(byDevice)")
        #expect(byDevice.filter { $0.key.hasPrefix("\(today) therapy (") }.values.first == 2, "\(byDevice)")
        #expect(Self.bars(in: stream, chart: "Entries per day by caregiver") == ["\(today) mum": 3, "\(today) dad": 2])
        #expect(stream.contains("{\"symbol\":\"help\",\"caregiver\":\"dad\"}"), "the newest entries, with the peer's")

        // The link worked once; a browser without the session is asked to get one.
        #expect(try await Self.dom(link, profile: cli.root + "/other-browser").contains("This link has expired"))
        #expect(
            try await Self.dom(base + "/dashboard/", profile: cli.root + "/other-browser").contains("lansync dashboard")
        )
    }

    /// A therapy room's machine in two families' groups, served by one agent: the dashboard opens
    /// on the list of groups (devices, in sync, today's activity), each group keeps its own pages
    /// with only its own peers and entries, and a link made for one family opens that family alone.
    @Test(.enabled(if: chromium != nil, "no chromium: run scripts/setup, which installs it"))
    func aNodeOfSeveralGroupsOpensOnTheListOfGroups() async throws {
        let cli = try CLI()
        defer { cli.remove() }
        try await cli.roomInTwoFamilies()
        try await cli.ok(["log", "append", "taps", "{\"symbol\":\"more\",\"family\":\"a\"}"], node: "home-a")
        for _ in 0..<2 {
            try await cli.ok(["log", "append", "taps", "{\"symbol\":\"help\",\"family\":\"b\"}"], node: "home-b")
        }
        let room = try await AgentProcess(cli, node: "room")
        defer { room.stop() }
        let homeA = try await AgentProcess(cli, node: "home-a", arguments: ["--peer", room.address])
        defer { homeA.stop() }
        let homeB = try await AgentProcess(cli, node: "home-b", arguments: ["--peer", room.address])
        defer { homeB.stop() }
        #expect(
            await eventually(within: 60) {
                let a = try? await cli.ok(["--group", "default", "status", "--json"], node: "room")
                let b = try? await cli.ok(["--group", "family-b", "status", "--json"], node: "room")
                return a?.contains("\"entries\":1") == true && b?.contains("\"entries\":2") == true
            }
        )

        let profile = cli.root + "/browser"
        let link = try await cli.ok(["dashboard"], node: "room").trimmingCharacters(in: .whitespacesAndNewlines)
        let base = link.components(separatedBy: "/login")[0]
        var groups = try await Self.dom(link, profile: profile)
        // Digests are announced every few seconds: the page refreshes; so do we.
        _ = await eventually(within: 30) {
            if groups.components(separatedBy: "<span class=\"ok\">in sync</span>").count == 3 { return true }
            groups = (try? await Self.dom(base + "/dashboard/", profile: profile)) ?? ""
            return false
        }
        #expect(groups.contains("<title>Groups · LANSync</title>"), "\(groups.prefix(600))")
        #expect(groups.contains(">default</a>") && groups.contains(">family-b</a>"), "\(groups)")
        #expect(groups.components(separatedBy: "<span class=\"ok\">in sync</span>").count == 3, "\(groups)")
        #expect(groups.contains("2 (1 connected)"), "each group: the room and its family's device")
        #expect(groups.contains("<td>1</td>") && groups.contains("<td>2</td>"), "today's entries per group")

        // A group's own pages: its peer and entries, nothing of the other family.
        let pageB = try await Self.dom(base + "/dashboard/groups/family-b/", profile: profile)
        #expect(pageB.contains(">home-b<") && !pageB.contains(">home-a<"), "\(pageB)")
        #expect(pageB.contains("group <strong>family-b</strong>") && pageB.contains(">all groups</a>"))
        let streamB = try await Self.dom(base + "/dashboard/groups/family-b/streams/taps", profile: profile)
        #expect(streamB.contains("\"family\":\"b\"") && !streamB.contains("\"family\":\"a\""), "\(streamB)")

        // A link for family B alone: it lands on B's pages; A's, or a group that does not exist,
        // answer alike, with the sign-in page.
        let linkB = try await cli.ok(["dashboard", "--group", "family-b"], node: "room")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let other = cli.root + "/browser-b"
        let landed = try await Self.dom(linkB, profile: other)
        #expect(landed.contains("group <strong>family-b</strong>") && landed.contains(">home-b<"), "\(landed)")
        #expect(!landed.contains("default") && !landed.contains(">home-a<"), "\(landed)")
        let overviewForB = try await Self.dom(base + "/dashboard/", profile: other)
        #expect(overviewForB.contains("group <strong>family-b</strong>"), "B's session goes to B's pages")
        let pageA = try await Self.dom(base + "/dashboard/groups/default/", profile: other)
        let nowhere = try await Self.dom(base + "/dashboard/groups/family-c/", profile: other)
        #expect(pageA.contains("lansync dashboard") && !pageA.contains("home-a"), "\(pageA)")
        #expect(pageA == nowhere, "a group this link does not open answers as one that does not exist")
    }
}
