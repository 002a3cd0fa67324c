import Foundation
import GRDB
import Hummingbird
import LANSync
import LANSyncAgent
import LANSyncCore
import LANSyncStore

/// The dashboard caregivers look at: server-rendered pages behind a browser session that a
/// one-time link opens (`lansync dashboard`). Pages: the group (who is connected, who is in sync,
/// who is behind and by how much, refused attempts and why; refreshed every 5 s), streams (entries
/// per day by device and by a payload field, newest entries, export), usage report and regression
/// flags, app tables (row counts, browsing) and preferences.
struct DashboardRoutes: Sendable {
    let agent: Agent
    let node: LANSyncNode
    let sessions: DashboardSessions
    /// The group's name on a node of several groups (its pages under `/dashboard/groups/NAME/`,
    /// with a link to the list of groups); nil on a node of one group (its pages under `/dashboard/`).
    var groupName: String? = nil

    /// Where the group's pages are, without the final slash.
    var base: String { groupName.map { "/dashboard/groups/" + HTML.component($0) } ?? "/dashboard" }

    /// A page of this group's, in the one layout.
    func page(title: String, current: String, refresh: Int? = nil, body: String) -> String {
        HTML.page(
            title: title,
            device: node.identity.name,
            current: current,
            refresh: refresh,
            base: base,
            group: groupName,
            body: body
        )
    }

    /// The group's pages on `router`, behind a browser session that may see the group.
    func register(on router: Router<BasicRequestContext>) {
        let path = groupName.map { "dashboard/groups/" + $0 } ?? "dashboard"
        let pages = router.group(RouterPath(path)).add(
            middleware: SessionGuard(sessions: sessions, group: groupName)
        )
        pages.get("") { _, _ in try await groupPage() }
        pages.get("streams") { _, _ in try streamsPage() }
        pages.get("streams/:stream") { request, context in try await streamPage(request, context) }
        pages.get("streams/:stream/report") { request, context in try await reportPage(request, context) }
        pages.get("streams/:stream/export.csv") { _, context in try exportCSV(context) }
        pages.get("streams/:stream/export.json") { _, context in try exportJSON(context) }
        pages.get("tables") { _, _ in try tablesPage() }
        pages.get("tables/:table") { request, context in try tablePage(request, context) }
        pages.get("preferences") { _, _ in try preferencesPage() }
    }

    // MARK: Login

    /// A one-time login link opening the groups `scope` names (nil: every group of the node).
    static func newLink(sessions: DashboardSessions, scope: Set<String>?) -> Response {
        let (code, expires) = sessions.newCode(scope: scope)
        return LocalAPIRoutes.json(
            ExportFile.object([
                ("path", ExportFile.quoted("/login?code=\(code)")),
                ("expires", ExportFile.quoted(Timestamps.iso8601(milliseconds: expires))),
            ]),
            status: .created
        )
    }

    static func login(_ request: Request, sessions: DashboardSessions, device: String) -> Response {
        guard let code = request.uri.queryParameters.get("code"), let session = sessions.redeem(String(code)) else {
            return Self.html(
                HTML.page(
                    title: "This link has expired",
                    device: device,
                    current: "",
                    body:
                        "<section><p>A dashboard link works once, for five minutes. Run <code>lansync dashboard</code> on this machine for a new one.</p></section>"
                ),
                status: .forbidden
            )
        }
        var headers = HTTPFields()
        headers[.location] = "/dashboard/"
        headers[.setCookie] =
            "\(DashboardSessions.cookieName)=\(session); HttpOnly; SameSite=Strict; Path=/; Max-Age=\(DashboardSessions.sessionLifetime / 1000)"
        return Response(status: .seeOther, headers: headers)
    }

    // MARK: Group

    func names() async -> [String: String] {
        var names = [node.deviceID.description: node.identity.name]
        for peer in await agent.report().peers {
            if let device = peer.deviceID, let name = peer.name { names[device] = name }
        }
        return names
    }

    func groupPage() async throws -> Response {
        let status = try LocalAPIRoutes.node { () throws(LANSyncError) in try node.status() }
        let report = await agent.report()
        let ours = status.digest.description
        let (connected, behind) = report.connectedPeers
        let verdict: String
        if connected.isEmpty {
            verdict =
                "<p class=\"warn\" id=\"verdict\">No peer connected: this device keeps every write and syncs when one comes back.</p>"
        } else if behind.isEmpty {
            verdict =
                "<p class=\"ok\" id=\"verdict\">In sync with all \(connected.count) connected peer\(connected.count == 1 ? "" : "s").</p>"
        } else {
            verdict =
                "<p class=\"warn\" id=\"verdict\">\(behind.count) of \(connected.count) connected peers not in sync yet.</p>"
        }
        let rows = report.peers.sorted { ($0.name ?? "", $0.address ?? "") < ($1.name ?? "", $1.address ?? "") }.map {
            peer -> [String] in
            let state: String
            switch peer.state {
            case .connected: state = "<span class=\"ok\">connected</span>"
            case .refused: state = "<span class=\"bad\">refused</span>"
            case .unreachable: state = "<span class=\"warn\">unreachable</span>"
            default: state = HTML.escape(peer.state.rawValue)
            }
            let sync: String
            if peer.state != .connected {
                sync = "—"
            } else if report.isInSync(with: peer) {
                sync = "<span class=\"ok\">in sync</span>"
            } else {
                let weLack = peer.weLack ?? 0
                let theyLack = peer.theyLack ?? 0
                sync =
                    "<span class=\"warn\">" + (weLack > 0 ? "we lack \(weLack)" : "")
                    + (weLack > 0 && theyLack > 0 ? ", " : "")
                    + (theyLack > 0 ? "it lacks \(theyLack)" : "") + (weLack == 0 && theyLack == 0 ? "syncing" : "")
                    + "</span>"
            }
            return [
                HTML.escape(peer.name ?? "(unknown)"), "<code>\(HTML.escape(peer.deviceID ?? "—"))</code>",
                HTML.escape(peer.address ?? "—"),
                state, sync, peer.lastSeen.map { HTML.escape(Self.ago($0)) } ?? "never",
                HTML.escape(peer.lastError ?? ""),
            ]
        }
        let body = """
            <section><h2>This device</h2>
            \(HTML.table(["name", "device ID", "entries", "streams", "preferences", "digest"], [[
                HTML.escape(node.identity.name), "<code>\(HTML.escape(node.deviceID.description))</code>", "\(status.entries)",
                "\(status.streams)", "\(status.preferences)", "<code>\(HTML.escape(String(ours.prefix(16))))…</code>",
            ]]))
            </section>
            <section><h2>Peers</h2>\(verdict)
            \(HTML.table(["name", "device ID", "address", "state", "sync", "last seen", "last problem"], rows, id: "peers"))
            <p>Refreshes every 5 seconds. A refused peer presented no valid group secret (or was removed); its last problem says why.</p>
            </section>
            \(membersSection(report: report))
            """
        return Self.html(
            page(title: "Group", current: "group", refresh: 5, body: body)
        )
    }

    /// The group's member devices, as `lansync group members` lists them.
    func membersSection(report: AgentReport) -> String {
        guard let members = try? node.members(), !members.isEmpty else { return "" }
        let names = Dictionary(members.map { ($0.deviceID, $0.name) }, uniquingKeysWith: { first, _ in first })
        let seen = Dictionary(
            report.peers.compactMap { peer in peer.deviceID.map { ($0, peer) } },
            uniquingKeysWith: { first, _ in first }
        )
        let me = node.deviceID.description
        let rows = members.map { member -> [String] in
            let status: String
            if member.isRemoved {
                status =
                    "<span class=\"bad\">removed by \(HTML.escape(member.removedBy.flatMap { names[$0] } ?? member.removedBy ?? "?"))"
                    + " \(HTML.escape(String((member.removedAt ?? "").prefix(10))))</span>"
            } else if let leftAt = member.leftAt {
                status = "left the group \(HTML.escape(String(leftAt.prefix(10))))"
            } else if member.deviceID == me {
                status = "this device"
            } else if seen[member.deviceID]?.state == .connected {
                status = "<span class=\"ok\">connected</span>"
            } else {
                status =
                    seen[member.deviceID]?.lastSeen.map { "last seen " + HTML.escape(Self.ago($0)) }
                    ?? "not seen by this device"
            }
            let addedBy =
                member.addedBy.flatMap { names[$0] } ?? (member.via == "created the group" ? "created the group" : "—")
            return [
                HTML.escape(member.name), "<code>\(HTML.escape(member.deviceID))</code>",
                member.key.map { "<code>\(HTML.escape(GroupMember.fingerprint($0)))</code>" } ?? "not seen yet",
                HTML.escape(addedBy), HTML.escape(String((member.addedAt ?? "").prefix(10))), status,
            ]
        }
        let epoch = (try? node.groupEpochs())??.epoch ?? 0
        return """
            <section><h2>Members</h2>
            \(HTML.table(["name", "device ID", "key", "added by", "added", "status"], rows, id: "members"))
            <p>Group epoch \(epoch). A device is removed with <code>lansync group remove NAME</code> on any member; it is then refused, also after a reinstall.</p>
            </section>
            """
    }

    // MARK: Streams

    func streamsPage() throws -> Response {
        let streams = try LocalAPIRoutes.node { () throws(LANSyncError) in
            do throws(StoreError) { return try node.store.streamSummaries() } catch {
                throw LANSyncError(.storage, error.message)
            }
        }
        let rows = streams.map { stream in
            [
                "<a href=\"\(base)/streams/\(HTML.component(stream.name))\">\(HTML.escape(stream.name))</a>",
                "\(stream.entries)",
                HTML.escape(Timestamps.iso8601(milliseconds: stream.newest)),
            ]
        }
        let body =
            "<section>"
            + (rows.isEmpty
                ? "<p>No entries yet.</p>" : HTML.table(["stream", "entries", "newest (UTC)"], rows, id: "streams"))
            + "</section>"
        return Self.html(page(title: "Streams", current: "streams", body: body))
    }

    func streamPage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let stream = try context.parameters.require("stream")
        let parameters = request.uri.queryParameters
        let days = try LocalAPIRoutes.number(parameters, "days", 1...366) ?? 30
        let reports = Reports(node: node)
        // Only the days shown: a year of taps is not read to draw a week.
        let entries = try reports.entries(stream, since: Reports.start(ofLast: days))
        let fields = Self.fields(entries.suffix(500))
        let field =
            parameters.get("field").map { String($0) } ?? ["caregiver", "location", "label", "symbol"].first {
                fields.contains($0)
            } ?? ""
        let now = Reports.now
        let dayList = (0..<days).reversed().map { UsageReports.dayText(now - Int64($0) * 86_400_000) }
        let names = await names()
        let byDevice = UsageReports.usage(entries, by: .device, days: days, now: now).map { count in
            (
                day: count.day, group: names[count.group].map { "\($0) (\(count.group.prefix(7)))" } ?? count.group,
                count: count.count
            )
        }
        var charts = StackedBarChart(title: "Entries per day by device", days: dayList, counts: byDevice).svg
        if !field.isEmpty {
            let byField = UsageReports.usage(entries, by: .field(field), days: days, now: now).map {
                (day: $0.day, group: $0.group, count: $0.count)
            }
            charts += StackedBarChart(title: "Entries per day by \(field)", days: dayList, counts: byField).svg
        }
        let options = ([""] + fields).map { name in
            "<option value=\"\(HTML.escape(name))\"\(name == field ? " selected" : "")>\(name.isEmpty ? "(none)" : HTML.escape(name))</option>"
        }.joined()
        let newest = entries.suffix(50).reversed().map { entry in
            [
                HTML.escape(Timestamps.iso8601(milliseconds: entry.wallMilliseconds)),
                HTML.escape(names[entry.originDevice.description] ?? entry.originDevice.description),
                "<code>\(HTML.escape(entry.payload))</code>",
            ]
        }
        let link = HTML.component(stream)
        let body = """
            <section><form method="get">
            <label>group by field<select name="field">\(options)</select></label>
            <label>days<input name="days" type="number" min="1" max="366" value="\(days)"></label>
            <button>show</button></form></section>
            <section>\(charts)</section>
            <section><h2>Newest entries</h2>
            <p><a href="\(base)/streams/\(link)/report">usage report and regression flags</a> ·
            export <a href="\(base)/streams/\(link)/export.csv">CSV</a> · <a href="\(base)/streams/\(link)/export.json">JSON</a></p>
            \(HTML.table(["time (UTC)", "device", "payload"], newest, id: "newest"))</section>
            """
        return Self.html(
            page(
                title: "Stream \(stream): \(entries.count) entries in \(days) day\(days == 1 ? "" : "s")",
                current: "streams",
                body: body
            )
        )
    }

    func reportPage(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let stream = try context.parameters.require("stream")
        let parameters = request.uri.queryParameters
        let reports = Reports(node: node)
        let fields = Self.fields(try reports.entries(stream, since: Reports.start(ofLast: 30)).suffix(500))
        let key =
            parameters.get("key").map { String($0) }
            ?? (fields.contains("symbol_id") ? "symbol_id" : fields.first ?? "")
        let sessionField =
            parameters.get("session_field").map { String($0) } ?? (fields.contains("session_id") ? "session_id" : "")
        let baselineDays = try LocalAPIRoutes.number(parameters, "baseline_days", 1...3_660) ?? 14
        let recentDays = try LocalAPIRoutes.number(parameters, "recent_days", 1...3_660) ?? 5
        let minUses = try LocalAPIRoutes.number(parameters, "min_uses", 1...1_000_000) ?? 5
        var body = """
            <section><form method="get">
            <label>key field<input name="key" value="\(HTML.escape(key))"></label>
            <label>session field<input name="session_field" value="\(HTML.escape(sessionField))"></label>
            <label>baseline days<input name="baseline_days" type="number" min="1" value="\(baselineDays)"></label>
            <label>recent days<input name="recent_days" type="number" min="1" value="\(recentDays)"></label>
            <label>min uses<input name="min_uses" type="number" min="1" value="\(minUses)"></label>
            <button>show</button></form></section>
            """
        if !key.isEmpty {
            let flags = try reports.regressions(
                stream: stream,
                key: key,
                baselineDays: baselineDays,
                recentDays: recentDays,
                minUses: minUses
            )
            let rows = flags.map { flag in
                [
                    HTML.escape(flag.key), HTML.escape(Timestamps.iso8601(milliseconds: flag.lastUsed)),
                    "\(flag.previousFrequency)",
                    String(format: "%.2f", flag.previousUsesPerDay),
                ]
            }
            body +=
                "<section><h2>Regression flags</h2><p>Values of \(HTML.escape(key)) used at least \(minUses) times in the \(baselineDays) days before the last \(recentDays), and not since.</p>"
                + (rows.isEmpty
                    ? "<p class=\"ok\" id=\"no-flags\">None.</p>"
                    : HTML.table([key, "last used (UTC)", "uses in baseline", "per day"], rows, id: "flags"))
                + "</section>"
        }
        if !sessionField.isEmpty {
            // Where each session happened and who was there, when the payloads say so.
            let detailFields = ["location", "caregiver"].filter { fields.contains($0) }
            let names = await names()
            let sessions = try reports.sessions(
                stream: stream,
                field: sessionField,
                details: detailFields,
                since: Reports.start(ofLast: 30)
            )
            .suffix(50).reversed()
            let rows = sessions.map { session in
                [
                    HTML.escape(session.id), HTML.escape(Timestamps.iso8601(milliseconds: session.start)),
                    String(format: "%.1f min", Double(session.durationMilliseconds) / 60_000), "\(session.entries)",
                    "\(session.distinctSymbols)",
                    session.longestPhrase.map { "\($0)" } ?? "—",
                    HTML.escape(session.devices.map { names[$0] ?? $0 }.joined(separator: ", ")),
                ]
                    + detailFields.map { HTML.escape(session.details[$0]?.joined(separator: ", ") ?? "—") }
            }
            body +=
                "<section><h2>Sessions</h2><p>The newest 50 of the last 30 days.</p>"
                + HTML.table(
                    ["session", "start (UTC)", "duration", "entries", "distinct symbols", "longest phrase", "device"]
                        + detailFields,
                    rows,
                    id: "sessions"
                )
                + "</section>"
        }
        return Self.html(
            page(title: "Report: \(stream)", current: "streams", body: body)
        )
    }

    func exportCSV(_ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        var text = ""
        _ = try LocalAPIRoutes.node { () throws(LANSyncError) in
            do { return try CSVExport.write(node, stream: stream) { text += $0 } } catch {
                throw LANSyncError(.storage, "\(error)")
            }
        }
        return Self.download(text, type: "text/csv; charset=utf-8", name: "\(stream).csv")
    }

    func exportJSON(_ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        let entries = try Reports(node: node).entries(stream)
        let text = entries.map { ExportFile.object(ExportFile.fields(of: $0)) + "\n" }.joined()
        return Self.download(text, type: "application/x-ndjson", name: "\(stream).jsonl")
    }

    // MARK: Tables and preferences

    func tablesPage() throws -> Response {
        let status = try LocalAPIRoutes.node { () throws(LANSyncError) in try node.status() }
        let rows = status.tables.map { table in
            [
                table.declared
                    ? "<a href=\"\(base)/tables/\(HTML.component(table.name))\">\(HTML.escape(table.name))</a>"
                    : HTML.escape(table.name),
                "\(table.rows)", table.declared ? "declared" : "kept for a newer app (not declared here)",
            ]
        }
        let body =
            "<section>"
            + (rows.isEmpty
                ? "<p>No app tables: apps declare them with <code>lansync schema apply</code>.</p>"
                : HTML.table(["table", "rows", ""], rows, id: "tables")) + "</section>"
        return Self.html(page(title: "App tables", current: "tables", body: body))
    }

    func tablePage(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        let name = try context.parameters.require("table")
        let status = try LocalAPIRoutes.node { () throws(LANSyncError) in try node.status() }
        guard let table = status.tables.first(where: { $0.name == name.lowercased() && $0.declared }) else {
            throw APIError(.notFound, "no_such_table", "this device's app declares no table '\(name)'")
        }
        let page = try LocalAPIRoutes.number(request.uri.queryParameters, "page", 0...1_000_000) ?? 0
        let (columns, values) = try LocalAPIRoutes.node { () throws(LANSyncError) in
            try AppSQL.query(
                "SELECT * FROM \(table.name.quotedDatabaseIdentifier) LIMIT 100 OFFSET ?",
                arguments: [page * 100],
                on: node,
                writeInstead: "POST /v1/exec"
            )
        }
        let rows = values.map { row in row.map { HTML.escape(AppSQL.plain($0)) } }
        let link = "\(base)/tables/\(HTML.component(table.name))?page="
        let navigation =
            (page > 0 ? "<a href=\"\(link)\(page - 1)\">previous 100</a> " : "")
            + (rows.count == 100 ? "<a href=\"\(link)\(page + 1)\">next 100</a>" : "")
        let body =
            "<section><p>\(table.rows) rows; rows \(page * 100 + 1)–\(page * 100 + rows.count) shown. \(navigation)</p>"
            + HTML.table(columns, rows, id: "rows") + "</section>"
        return Self.html(
            self.page(title: "Table \(table.name)", current: "tables", body: body)
        )
    }

    func preferencesPage() throws -> Response {
        let preferences = try LocalAPIRoutes.node { () throws(LANSyncError) in try node.preferences() }
        let rows = preferences.map { write in
            [
                HTML.escape(write.key), "<code>\(HTML.escape(write.value ?? ""))</code>",
                HTML.escape(Timestamps.iso8601(milliseconds: write.wallMilliseconds)),
                "<code>\(HTML.escape(write.originDevice.description))</code>",
            ]
        }
        let body =
            "<section>"
            + (rows.isEmpty
                ? "<p>No preferences set.</p>"
                : HTML.table(["key", "value", "set at (UTC)", "by device"], rows, id: "preferences"))
            + "</section>"
        return Self.html(
            page(title: "Preferences", current: "preferences", body: body)
        )
    }

    // MARK: Helpers

    /// Top-level payload fields of `entries`, by name.
    static func fields(_ entries: some Sequence<Entry>) -> [String] {
        var names = Set<String>()
        for entry in entries {
            if let object = try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8)) as? [String: Any] {
                names.formUnion(object.keys)
            }
        }
        return names.sorted()
    }

    static func ago(_ milliseconds: Int64) -> String {
        let seconds = max(0, (Reports.now - milliseconds) / 1000)
        if seconds < 60 { return "\(seconds) s ago" }
        if seconds < 3600 { return "\(seconds / 60) min ago" }
        if seconds < 86_400 { return "\(seconds / 3600) h ago" }
        return Timestamps.iso8601(milliseconds: milliseconds)
    }

    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        // No script runs on these pages, and no other site may frame them.
        headers[.contentSecurityPolicy] =
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func download(_ text: String, type: String, name: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.contentDisposition] =
            "attachment; filename=\"\(name.filter { $0.isLetter || $0.isNumber || "._-".contains($0) })\""
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Lets a dashboard page through only with a browser session a one-time link opened; otherwise
/// says how to get one.
struct SessionGuard<Context: RequestContext>: RouterMiddleware {
    let sessions: DashboardSessions
    /// The group whose pages these are (nil: a node of one group, or the list of groups).
    var group: String? = nil

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let session = sessions.session(inCookies: request.headers[.cookie]),
            group.map({ sessions.allows(session, group: $0) }) ?? true
        else { return Self.signIn() }
        return try await next(request, context)
    }

    /// What a browser without a session for the page gets (also for a group that does not exist).
    static func signIn() -> Response {
        DashboardRoutes.html(
            HTML.page(
                title: "Sign in",
                device: "",
                current: "",
                body:
                    "<section><p>Open the dashboard with the link <code>lansync dashboard</code> prints on this machine (it works once, for five minutes).</p></section>"
            ),
            status: .unauthorized
        )
    }
}
