import Foundation
import LANSync
import LANSyncCore
import LANSyncStore

/// The usage reports of one stream, as the API and the dashboard ask for them: `UsageReports`
/// (the CLI's implementation) over the stream's entries, with the node's errors as the API's.
struct Reports {
    let node: LANSyncNode

    func entries(_ stream: String) throws(APIError) -> [Entry] {
        if let problem = Names.streamProblem(stream) { throw APIError(.badRequest, "invalid_input", problem) }
        do { return try node.entries(EntryQuery(stream: stream)) } catch { throw APIError(error) }
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    func usage(stream: String, by: String, days: Int) throws(APIError) -> [UsageReports.DayCount] {
        UsageReports.usage(try entries(stream), by: by == "device" ? .device : .field(by), days: days, now: Self.now)
    }

    func sessions(stream: String, field: String, details: [String] = []) throws(APIError) -> [UsageReports.Session] {
        UsageReports.sessions(try entries(stream), sessionField: field, details: details)
    }

    func regressions(stream: String, key: String, baselineDays: Int, recentDays: Int, minUses: Int) throws(APIError) -> [UsageReports.RegressionFlag] {
        UsageReports.regressions(try entries(stream), key: key, baselineDays: baselineDays, recentDays: recentDays, minUses: minUses, now: Self.now)
    }
}
