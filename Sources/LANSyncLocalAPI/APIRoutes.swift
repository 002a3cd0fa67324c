import Foundation
import GRDB
import Hummingbird
import LANSync
import LANSyncAgent
import LANSyncCore
import LANSyncStore

/// The API's routes: each one what a CLI command does, as JSON over HTTP (see docs/openapi.json,
/// which a test checks against the router's routes).
struct LocalAPIRoutes: Sendable {
    let agent: Agent
    let node: LANSyncNode
    let feeds: OpenFeeds

    /// Request bodies larger than this are refused (413): a batch of a thousand large taps fits.
    static let maxBody = 8 << 20

    /// Registers the routes on `v1`, the `/v1` group behind the token.
    func register(on v1: RouterGroup<BasicRequestContext>) { Self.register(on: v1) { _ in self } }

    /// Registers the routes on `v1`, each served by the routes `resolve` picks for the request:
    /// with several groups, those of the group the path names (`/v1/groups/{group}/…`).
    static func register(
        on v1: RouterGroup<BasicRequestContext>,
        _ resolve: @escaping @Sendable (BasicRequestContext) throws -> LocalAPIRoutes
    ) {
        v1.get("status") { _, context in try await resolve(context).status() }
        v1.get("peers") { _, context in try await resolve(context).peers() }
        v1.post("streams/:stream/entries") { request, context in try await resolve(context).append(request, context) }
        v1.post("streams/:stream/entries/batch") { request, context in
            try await resolve(context).appendBatch(request, context)
        }
        v1.get("streams/:stream/entries") { request, context in try resolve(context).entries(request, context) }
        v1.get("preferences") { _, context in try resolve(context).preferences() }
        // Keys hold slashes ("caregiver/active"): the rest of the path is the key.
        v1.get("preferences/**") { _, context in try resolve(context).preference(context) }
        v1.put("preferences/**") { request, context in try await resolve(context).setPreference(request, context) }
        v1.delete("preferences/**") { _, context in try await resolve(context).unsetPreference(context) }
        v1.post("query") { request, context in try await resolve(context).query(request) }
        v1.post("exec") { request, context in try await resolve(context).exec(request) }
        v1.get("orphans") { _, context in try resolve(context).orphans() }
        v1.get("changes") { request, context in try resolve(context).changes(request) }
        v1.get("streams/:stream/reports/usage") { request, context in try resolve(context).usage(request, context) }
        v1.get("streams/:stream/reports/sessions") { request, context in try resolve(context).sessions(request, context)
        }
        v1.get("streams/:stream/reports/regression") { request, context in
            try resolve(context).regression(request, context)
        }
    }

    // MARK: Status

    func status() async throws -> Response {
        let status = try node.status()
        let report = await agent.report()
        let connected = report.peers.filter { $0.state == .connected }.count
        return Self.json(
            ExportFile.object([
                ("device_id", ExportFile.quoted(node.deviceID.description)),
                ("replica_id", ExportFile.quoted(status.replica.description)),
                ("name", ExportFile.quoted(node.identity.name)),
                ("entries", "\(status.entries)"), ("streams", "\(status.streams)"),
                ("preferences", "\(status.preferences)"), ("unset_preferences", "\(status.tombstones)"),
                (
                    "tables",
                    "["
                        + status.tables.map { table in
                            ExportFile.object([
                                ("name", ExportFile.quoted(table.name)), ("declared", "\(table.declared)"),
                                ("rows", "\(table.rows)"),
                            ])
                        }.joined(separator: ",") + "]"
                ),
                ("digest", ExportFile.quoted(status.digest.description)),
                ("hlc", ExportFile.quoted(status.hlc.description)),
                ("version_vector", ExportFile.json(status.versionVector)),
                ("cursor", ExportFile.quoted(FeedCursor(status.versionVector).text)),
                ("port", "\(report.port)"), ("peers_connected", "\(connected)"),
                ("in_sync_with", "\(report.connectedDigests.values.filter { $0 == status.digest.description }.count)"),
            ])
        )
    }

    /// App-table rows whose parent row is missing (`LANSyncNode.orphans`).
    func orphans() throws -> Response {
        let orphans = try Self.node { () throws(LANSyncError) in try node.orphans() }
        return Self.json(
            "{\"orphans\":["
                + orphans.map { orphan in
                    ExportFile.object([
                        ("table", ExportFile.quoted(orphan.table)),
                        ("key", "[" + orphan.key.map(ExportFile.quoted).joined(separator: ",") + "]"),
                        ("parent", ExportFile.quoted(orphan.parent)),
                    ])
                }.joined(separator: ",") + "]}"
        )
    }

    func peers() async -> Response {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys]
        let report = await agent.report()
        let peers = report.peers.map { peer in
            String(decoding: (try? encoder.encode(peer)) ?? Data("{}".utf8), as: UTF8.self)
        }
        return Self.json("{\"peers\":[" + peers.joined(separator: ",") + "]}")
    }

    // MARK: Streams

    func append(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let stream = try context.parameters.require("stream")
        let payload = try await Self.text(request)
        let id = request.uri.queryParameters.get("id")
        let entry = try await Self.node { () async throws(LANSyncError) in
            try await node.append(to: stream, payload: payload, id: id)
        }
        return Self.json(ExportFile.object(ExportFile.fields(of: entry)), status: .created)
    }

    /// One payload per line (NDJSON), all or none.
    func appendBatch(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let stream = try context.parameters.require("stream")
        let lines = try await Self.text(request).split(whereSeparator: \.isNewline).filter {
            !$0.allSatisfy(\.isWhitespace)
        }
        guard !lines.isEmpty else {
            throw APIError(.badRequest, "invalid_input", "the body holds no payloads; send one JSON value per line")
        }
        let requests = lines.map { AppendRequest(id: nil, stream: stream, payload: String($0)) }
        let appended = try await Self.node { () async throws(LANSyncError) in try await node.append(requests) }
        return Self.json(
            "{\"entries\":[" + appended.map { ExportFile.object(ExportFile.fields(of: $0)) }.joined(separator: ",")
                + "]}",
            status: .created
        )
    }

    func entries(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        let parameters = request.uri.queryParameters
        let query = EntryQuery(
            stream: stream,
            since: try Self.number(parameters, "since", 0...Int.max).map(Int64.init),
            until: try Self.number(parameters, "until", 0...Int.max).map(Int64.init),
            limit: try Self.number(parameters, "limit", 1...100_000) ?? 1_000
        )
        let found = try Self.node { () throws(LANSyncError) in try node.entries(query) }
        return Self.json(
            "{\"entries\":[" + found.map { ExportFile.object(ExportFile.fields(of: $0)) }.joined(separator: ",") + "]}"
        )
    }

    // MARK: Preferences

    func preferences() throws -> Response {
        let all = try Self.node { () throws(LANSyncError) in try node.preferences() }
        return Self.json(
            "{\"preferences\":[" + all.map { ExportFile.object(ExportFile.fields(of: $0)) }.joined(separator: ",")
                + "]}"
        )
    }

    /// The preference key a route's path names after `/v1/preferences/` (its `**`): the segments
    /// joined by `/`, each percent-decoded (so `caregiver%2Factive` names `caregiver/active` too).
    static func preferenceKey(_ context: BasicRequestContext) throws -> String {
        let key = try context.parameters.getCatchAll().map { segment in
            guard let text = String(segment).removingPercentEncoding else {
                throw APIError(.badRequest, "invalid_input", "the key in the path is not valid percent-encoded UTF-8")
            }
            return text
        }.joined(separator: "/")
        guard !key.isEmpty else {
            throw APIError(
                .badRequest,
                "invalid_input",
                "name a preference: /v1/preferences/KEY, e.g. /v1/preferences/caregiver/active"
            )
        }
        return key
    }

    func preference(_ context: BasicRequestContext) throws -> Response {
        let key = try Self.preferenceKey(context)
        guard let value = try Self.node({ () throws(LANSyncError) in try node.preference(key) }) else {
            throw APIError(
                .notFound,
                "not_set",
                "preference '\(key)' is not set; set it with PUT /v1/preferences/\(key)"
            )
        }
        return Self.json(ExportFile.object([("key", ExportFile.quoted(key)), ("value", value)]))
    }

    func setPreference(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try Self.preferenceKey(context)
        let value = try await Self.text(request)
        let write = try await Self.node { () async throws(LANSyncError) in try await node.set(key, to: value) }
        return Self.json(ExportFile.object(ExportFile.fields(of: write)))
    }

    func unsetPreference(_ context: BasicRequestContext) async throws -> Response {
        let key = try Self.preferenceKey(context)
        let write = try await Self.node { () async throws(LANSyncError) in try await node.unset(key) }
        return Self.json(ExportFile.object(ExportFile.fields(of: write)))
    }

    // MARK: App tables

    /// `{"sql": "…", "arguments": [values]}`, the body of `query` and `exec`.
    struct SQLRequest: Decodable {
        let sql: String
        let arguments: [SQLArgument]?
        /// Exec only: the rows are seed data, which every real write beats.
        let seed: Bool?
    }

    func query(_ request: Request) async throws -> Response {
        let body = try await Self.decode(SQLRequest.self, request)
        let arguments = StatementArguments((body.arguments ?? []).map(\.databaseValue))
        let (columns, rows) = try Self.node { () throws(LANSyncError) in
            try AppSQL.query(body.sql, arguments: arguments, on: node, writeInstead: "POST /v1/exec")
        }
        let columnList = columns.map(ExportFile.quoted).joined(separator: ",")
        let rowList = rows.map { "[" + $0.map(AppSQL.json).joined(separator: ",") + "]" }.joined(separator: ",")
        return Self.json("{\"columns\":[\(columnList)],\"rows\":[\(rowList)]}")
    }

    func exec(_ request: Request) async throws -> Response {
        let body = try await Self.decode(SQLRequest.self, request)
        let arguments = StatementArguments((body.arguments ?? []).map(\.databaseValue))
        let changed = try await Self.node { () async throws(LANSyncError) in
            try await AppSQL.execute(body.sql, arguments: arguments, seed: body.seed ?? false, on: node)
        }
        return Self.json("{\"changed\":\(changed)}")
    }

    // MARK: Reports (the same implementation as `lansync report` and the dashboard)

    func usage(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        let parameters = request.uri.queryParameters
        let by = parameters.get("by").map { String($0) } ?? "device"
        let days = try Self.number(parameters, "days", 1...3_660) ?? 30
        let counts = try Reports(node: node).usage(stream: stream, by: by, days: days)
        let list = counts.map {
            ExportFile.object([
                ("day", ExportFile.quoted($0.day)), ("group", ExportFile.quoted($0.group)), ("count", "\($0.count)"),
            ])
        }
        return Self.json(
            "{\"by\":\(ExportFile.quoted(by)),\"days\":\(days),\"counts\":[\(list.joined(separator: ","))]}"
        )
    }

    func sessions(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        guard let field = request.uri.queryParameters.get("session_field").map({ String($0) }), !field.isEmpty else {
            throw APIError(
                .badRequest,
                "invalid_input",
                "give the payload field that names a session, e.g. ?session_field=session_id"
            )
        }
        let list = try Reports(node: node).sessions(stream: stream, field: field).map { session in
            ExportFile.object([
                ("session", ExportFile.quoted(session.id)),
                ("start", ExportFile.quoted(Timestamps.iso8601(milliseconds: session.start))),
                ("end", ExportFile.quoted(Timestamps.iso8601(milliseconds: session.end))),
                ("duration_ms", "\(session.durationMilliseconds)"),
                ("entries", "\(session.entries)"), ("distinct_symbols", "\(session.distinctSymbols)"),
                ("longest_phrase", session.longestPhrase.map { "\($0)" } ?? "null"),
                ("devices", "[" + session.devices.map(ExportFile.quoted).joined(separator: ",") + "]"),
            ])
        }
        return Self.json("{\"sessions\":[\(list.joined(separator: ","))]}")
    }

    func regression(_ request: Request, _ context: BasicRequestContext) throws -> Response {
        let stream = try context.parameters.require("stream")
        let parameters = request.uri.queryParameters
        guard let key = parameters.get("key").map({ String($0) }), !key.isEmpty else {
            throw APIError(.badRequest, "invalid_input", "give the payload field to watch, e.g. ?key=symbol_id")
        }
        let flags = try Reports(node: node).regressions(
            stream: stream,
            key: key,
            baselineDays: try Self.number(parameters, "baseline_days", 1...3_660) ?? 14,
            recentDays: try Self.number(parameters, "recent_days", 1...3_660) ?? 5,
            minUses: try Self.number(parameters, "min_uses", 1...1_000_000) ?? 5
        )
        let list = flags.map { flag in
            ExportFile.object([
                ("key", ExportFile.quoted(flag.key)),
                ("last_used", ExportFile.quoted(Timestamps.iso8601(milliseconds: flag.lastUsed))),
                ("previous_frequency", "\(flag.previousFrequency)"),
                ("per_day", String(format: "%.2f", flag.previousUsesPerDay)),
            ])
        }
        return Self.json("{\"flags\":[\(list.joined(separator: ","))]}")
    }

    /// A whole-number query parameter within `range`, or nil when absent.
    static func number(
        _ parameters: some Collection<(key: Substring, value: Substring)>,
        _ name: String,
        _ range: ClosedRange<Int>
    ) throws -> Int? {
        guard let text = parameters.first(where: { $0.key == name })?.value else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw APIError(
                .badRequest,
                "invalid_input",
                "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'"
            )
        }
        return value
    }

    // MARK: Change feed

    func changes(_ request: Request) throws -> Response {
        let given: String? =
            request.headers[.init("Last-Event-ID")!] ?? request.uri.queryParameters.get("cursor").map { String($0) }
        let cursor: FeedCursor
        switch given {
        case nil, "": cursor = FeedCursor()
        case "now": cursor = FeedCursor(try Self.node { () throws(LANSyncError) in try node.status() }.versionVector)
        case let text?:
            guard let read = FeedCursor(text: text) else {
                throw APIError(
                    .badRequest,
                    "invalid_cursor",
                    "'\(text.prefix(80))' is not a cursor of this API; resume with the id of the last event you received, or omit it to start from the beginning"
                )
            }
            cursor = read
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        // Released by the feed as it ends.
        try feeds.reserve()
        return Response(
            status: .ok,
            headers: headers,
            body: ChangeFeedStream(node: node, cursor: cursor, open: feeds).body()
        )
    }

    // MARK: Helpers

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    static func text(_ request: Request) async throws -> String {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBody)
        } catch {
            throw APIError(
                .contentTooLarge,
                "too_large",
                "the body is over \(maxBody >> 20) MiB; send fewer entries per request"
            )
        }
        do {
            return try StrictUTF8.decode(buffer.readableBytesView, "the body")
        } catch {
            throw APIError(.badRequest, "invalid_input", error.message)
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request) async throws -> T {
        let text = try await text(request)
        do {
            return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        } catch {
            throw APIError(
                .badRequest,
                "invalid_input",
                "the body is not the JSON object this route takes (\(error)); see docs/openapi.json"
            )
        }
    }

    /// Runs a node call, answering its error as the API does.
    static func node<T>(_ body: () throws(LANSyncError) -> T) throws(APIError) -> T {
        do { return try body() } catch { throw APIError(error) }
    }

    static func node<T>(_ body: () async throws(LANSyncError) -> T) async throws(APIError) -> T {
        do { return try await body() } catch { throw APIError(error) }
    }
}

/// A JSON value given as an SQL argument: null, a number, a string or a boolean (as 1 or 0).
struct SQLArgument: Decodable {
    let databaseValue: DatabaseValue

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            databaseValue = .null
        } else if let bool = try? container.decode(Bool.self) {
            databaseValue = (bool ? 1 : 0).databaseValue
        } else if let integer = try? container.decode(Int64.self) {
            databaseValue = integer.databaseValue
        } else if let real = try? container.decode(Double.self) {
            databaseValue = real.databaseValue
        } else {
            databaseValue = try container.decode(String.self).databaseValue
        }
    }
}
