import Foundation
import Hummingbird
import LANSync
import LANSyncAgent
import LANSyncStore

/// The dashboard's first page on a node of several groups (a therapy room's machine): one line
/// per group the browser session may see, with its devices, whether it is in sync, and today's
/// activity, each linking to that group's own pages. A session that may see one group goes
/// straight to it, so a family's link never shows that other groups exist.
struct GroupsOverview: Sendable {
    let groups: [(name: String, agent: Agent, node: LANSyncNode)]
    let sessions: DashboardSessions

    func register(on router: Router<BasicRequestContext>) {
        let overview = router.group("dashboard").add(middleware: SessionGuard(sessions: sessions))
        overview.get("") { request, _ in try await page(request) }
        // A group this session may not see answers as a group that does not exist.
        router.get("dashboard/groups/**") { _, _ in SessionGuard<BasicRequestContext>.signIn() }
    }

    func page(_ request: Request) async throws -> Response {
        let session = sessions.session(inCookies: request.headers[.cookie]) ?? ""
        let scope = sessions.scope(of: session)
        let visible = groups.filter { scope?.contains($0.name) ?? true }
        if visible.count == 1 {
            var headers = HTTPFields()
            headers[.location] = "/dashboard/groups/\(HTML.component(visible[0].name))/"
            return Response(status: .seeOther, headers: headers)
        }
        var rows: [[String]] = []
        for group in visible { rows.append(try await row(group)) }
        let device = groups.first?.node.identity.name ?? ""
        let body = """
            <section><p>This machine serves \(visible.count) groups, kept apart: each has its own devices and data.</p>
            \(HTML.table(["group", "devices", "sync", "entries today (UTC)", "last entry (UTC)"], rows, id: "groups"))
            <p>Refreshes every 5 seconds. Open a group for its peers, streams, tables and preferences.</p>
            </section>
            """
        return DashboardRoutes.html(
            HTML.page(title: "Groups", device: device, current: "groups", refresh: 5, body: body)
        )
    }

    private func row(_ group: (name: String, agent: Agent, node: LANSyncNode)) async throws -> [String] {
        let node = group.node
        let midnight = Int64(Date().timeIntervalSince1970 / 86_400) * 86_400_000
        let (members, streams) = try LocalAPIRoutes.node { () throws(LANSyncError) in
            let streams: [StreamSummary]
            do throws(StoreError) { streams = try node.store.streamSummaries(since: midnight) } catch {
                throw LANSyncError(.storage, error.message)
            }
            return (try node.members().filter(\.isPresent).count, streams)
        }
        let report = await group.agent.report()
        let (connected, behind) = report.connectedPeers
        let sync: String
        if connected.isEmpty {
            sync = "<span class=\"warn\">no peer connected</span>"
        } else if behind.isEmpty {
            sync = "<span class=\"ok\">in sync</span>"
        } else {
            let missing = behind.reduce(UInt64(0)) { $0 + ($1.weLack ?? 0) + ($1.theyLack ?? 0) }
            sync =
                "<span class=\"warn\">behind: \(behind.count) peer\(behind.count == 1 ? "" : "s"), \(missing) changes</span>"
        }
        let today = streams.reduce(0) { $0 + $1.entriesSince }
        let newest = streams.map(\.newest).max()
        return [
            "<a href=\"/dashboard/groups/\(HTML.component(group.name))/\">\(HTML.escape(group.name))</a>",
            "\(members) (\(connected.count) connected)", sync, "\(today)",
            newest.map { HTML.escape(Timestamps.iso8601(milliseconds: $0)) } ?? "none yet",
        ]
    }
}
