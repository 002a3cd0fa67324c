import Foundation
import Hummingbird
import LANSync
import LANSyncCore
import Synchronization

/// The change feed as Server-Sent Events: everything the replica holds that the cursor does not
/// cover, in batches, then each new commit as it happens.
///
/// Each batch is one event, `event: changes`, whose `id` is the cursor after it and whose data is
/// `{"cursor", "entries", "preferences", "rows"}` (entries and preferences as `lansync export`
/// writes them). A client that reconnects with the last id it received (`Last-Event-ID`, as
/// browsers' EventSource does, or `?cursor=`) gets exactly what came after: a batch is applied
/// whole or not at all, so nothing is missed or repeated. For preferences and rows, a change
/// superseded before the client read it is not sent; its successor is. A comment line every 15 s
/// keeps idle connections open through proxies and tells the client the agent is alive.
struct ChangeFeedStream: Sendable {
    let node: LANSyncNode
    let cursor: FeedCursor
    let open: OpenFeeds
    var batchRows = 500
    var heartbeat = Duration.seconds(15)

    private enum Wake: Sendable { case change, heartbeat }

    func body() -> ResponseBody {
        let (node, start, batchRows, heartbeat, open) = (node, cursor, batchRows, heartbeat, open)
        return ResponseBody { writer in
            try await Self.run(
                node: node,
                start: start,
                batchRows: batchRows,
                heartbeat: heartbeat,
                open: open,
                writer: &writer
            )
        }
    }

    private static func run(
        node: LANSyncNode,
        start: FeedCursor,
        batchRows: Int,
        heartbeat: Duration,
        open: OpenFeeds,
        writer: inout any ResponseBodyWriter
    ) async throws {
        // Listen before the first read: a commit between the read and the first wait still wakes us.
        let changes = node.changes()
        let (wakes, wake) = AsyncStream<Wake>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // When the agent stops, the feed ends (the client reconnects to the next agent with its cursor).
        let registration = open.add { wake.finish() }
        defer {
            open.remove(registration)
            open.release()
        }
        // What wakes the feed lives exactly as long as the feed: a commit, and the heartbeat.
        try await withThrowingDiscardingTaskGroup { wakers in
            wakers.addTask {
                for await _ in changes { wake.yield(.change) }
                wake.finish()
            }
            wakers.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: heartbeat)
                    wake.yield(.heartbeat)
                }
            }
            try await serve(node: node, start: start, batchRows: batchRows, wakes: wakes, writer: &writer)
            wakers.cancelAll()
        }
    }

    /// Sends what the cursor does not cover, then waits for a wake, until the feed ends.
    private static func serve(
        node: LANSyncNode,
        start: FeedCursor,
        batchRows: Int,
        wakes: AsyncStream<Wake>,
        writer: inout any ResponseBodyWriter
    ) async throws {
        var cursor = start
        try await writer.write(ByteBuffer(string: ": lansync change feed\nretry: 1000\n\n"))
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled {
            let delta: Delta
            do {
                delta = try node.store.delta(since: cursor.vector, maxRows: batchRows)
            } catch {
                try await writer.write(
                    ByteBuffer(
                        string:
                            "event: error\ndata: \(APIError(.internalServerError, "storage", error.message).json)\n\n"
                    )
                )
                break
            }
            if !delta.isEmpty {
                cursor.vector.advance(by: delta.coverage)
                if !delta.entries.isEmpty || !delta.preferences.isEmpty || !delta.rows.isEmpty {
                    try await writer.write(ByteBuffer(string: Self.event(delta, cursor: cursor)))
                }
                continue
            }
            guard let reason = await iterator.next() else { break }
            if reason == .heartbeat { try await writer.write(ByteBuffer(string: ": alive\n\n")) }
        }
        try await writer.finish(nil)
    }

    static func event(_ delta: Delta, cursor: FeedCursor) -> String {
        let text = cursor.text
        let entries = delta.entries.map { ExportFile.object(ExportFile.fields(of: $0)) }.joined(separator: ",")
        let preferences = delta.preferences.map { ExportFile.object(ExportFile.fields(of: $0)) }.joined(separator: ",")
        let rows = delta.rows.map(Self.json).joined(separator: ",")
        let data =
            "{\"cursor\":\(ExportFile.quoted(text)),\"entries\":[\(entries)],\"preferences\":[\(preferences)],\"rows\":[\(rows)]}"
        return "id: \(text)\nevent: changes\ndata: \(data)\n\n"
    }

    /// A row change: its table and key, what it did, and the columns it wrote.
    static func json(_ change: RowChange) -> String {
        ExportFile.object([
            ("type", ExportFile.quoted("row")), ("table", ExportFile.quoted(change.key.table)),
            ("key", "[" + change.key.primaryKey.map(ExportFile.json).joined(separator: ",") + "]"),
            ("kind", ExportFile.quoted("\(change.kind)")),
            ("replica_id", ExportFile.quoted(change.dot.replica.description)),
            ("counter", "\(change.dot.counter)"), ("hlc", ExportFile.quoted(change.hlc.description)),
            ("values", ExportFile.object(change.values.map { ($0.column, ExportFile.json($0.value)) })),
            ("totals", ExportFile.object(change.totals.map { ($0.column, "\($0.total)") })),
        ])
    }
}

/// The change feeds being served, so that stopping the agent ends them: an open event stream
/// would otherwise hold the server's graceful shutdown until the client hangs up.
package final class OpenFeeds: Sendable {
    private let state = Mutex<(next: Int, closers: [Int: @Sendable () -> Void], closed: Bool, reserved: Int)>(
        (0, [:], false, 0)
    )
    private let limit: Int

    package init(limit: Int = APILimits.feeds) { self.limit = limit }

    /// Takes one of the `limit` places for a feed about to start, or answers 503 with Retry-After
    /// when all are taken. The feed gives it back with `release()` as it ends.
    package func reserve() throws(APIError) {
        let taken = state.withLock { state in
            guard state.reserved < limit else { return false }
            state.reserved += 1
            return true
        }
        guard taken else {
            throw APIError(
                .serviceUnavailable,
                "too_many_feeds",
                "\(limit) change feeds are open already; retry in \(APILimits.retryAfterSeconds) s, or share one feed between your program's parts",
                retryAfter: APILimits.retryAfterSeconds
            )
        }
    }

    package func release() { state.withLock { $0.reserved -= 1 } }

    /// Registers a feed's closer (run at once when already closed); returns its registration.
    package func add(_ close: @escaping @Sendable () -> Void) -> Int {
        let (id, closed) = state.withLock { state in
            state.next += 1
            if !state.closed { state.closers[state.next] = close }
            return (state.next, state.closed)
        }
        if closed { close() }
        return id
    }

    package func remove(_ id: Int) { _ = state.withLock { $0.closers.removeValue(forKey: id) } }

    package func closeAll() {
        let closers = state.withLock { state in
            state.closed = true
            defer { state.closers.removeAll() }
            return Array(state.closers.values)
        }
        for close in closers { close() }
    }
}
