import Foundation
import LANSync
import LANSyncCore
import LANSyncStore

/// The usage reports of one stream, as the API and the dashboard ask for them: `UsageReports`
/// (the CLI's implementation) over the stream's entries, with the node's errors as the API's.
struct Reports {
    let node: LANSyncNode

    /// The stream's entries, oldest first; only those written at or after `since` (wall-clock
    /// milliseconds) when given, so a report over weeks does not read a year of taps.
    func entries(_ stream: String, since: Int64? = nil) throws(APIError) -> [Entry] {
        if let problem = Names.streamProblem(stream) { throw APIError(.badRequest, "invalid_input", problem) }
        do { return try node.entries(EntryQuery(stream: stream, since: since)) } catch { throw APIError(error) }
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
    static func start(ofLast days: Int) -> Int64 { UsageReports.firstDay(ofLast: days, now: now) }

    func usage(stream: String, by: String, days: Int) throws(APIError) -> [UsageReports.DayCount] {
        UsageReports.usage(
            try entries(stream, since: Self.start(ofLast: days)),
            by: by == "device" ? .device : .field(by),
            days: days,
            now: Self.now
        )
    }

    func sessions(
        stream: String,
        field: String,
        details: [String] = [],
        since: Int64? = nil
    ) throws(APIError) -> [UsageReports.Session] {
        UsageReports.sessions(try entries(stream, since: since), sessionField: field, details: details)
    }

    func regressions(
        stream: String,
        key: String,
        baselineDays: Int,
        recentDays: Int,
        minUses: Int
    ) throws(APIError) -> [UsageReports.RegressionFlag] {
        // Entries before the baseline window cannot flag anything: a flagged key was last used in it.
        UsageReports.regressions(
            try entries(stream, since: Self.start(ofLast: baselineDays + recentDays)),
            key: key,
            baselineDays: baselineDays,
            recentDays: recentDays,
            minUses: minUses,
            now: Self.now
        )
    }
}
