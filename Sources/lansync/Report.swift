import ArgumentParser
import Foundation
import LANSync

/// `lansync report`: what caregivers ask of a stream — use per day, sessions, and symbols that fell
/// out of use. The computations are `UsageReports`, shared with the library.
struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Usage per day, sessions, and possible regressions, from a stream's entries.",
        discussion: """
            Days are UTC calendar days. A payload FIELD is a top-level key of the entries' JSON payloads; its value counts as text.

            Examples:
              lansync report usage symbol_taps --days 7
              lansync report usage symbol_taps --by caregiver_profile_id --json
              lansync report sessions symbol_taps --session-field session_id
              lansync report regression symbol_taps --key symbol_id
            """,
        subcommands: [Usage.self, Sessions.self, Regression.self]
    )

    /// Every entry of `stream` (written at or after `since`, ms), checked first.
    static func entries(_ global: GlobalOptions, stream: String, since: Int64? = nil) async throws -> [Entry] {
        try await entries(try await reportingErrors { try global.openNode() }, stream: stream, since: since)
    }

    static func entries(_ node: LANSyncNode, stream: String, since: Int64? = nil) async throws -> [Entry] {
        try await reportingErrors { try node.entries(EntryQuery(stream: stream, since: since)) }
    }

    /// Each device's name as the group's records know it, by device ID: `plain` is the name, and
    /// `shown` adds the start of the ID when another device has the same name.
    static func deviceNames(_ node: LANSyncNode) -> [String: (plain: String, shown: String)] {
        var names: [String: String] = [node.deviceID.description: node.identity.name]
        for member in (try? node.members()) ?? [] where !member.name.isEmpty {
            names[member.deviceID.uppercased()] = names[member.deviceID.uppercased()] ?? member.name
        }
        let shared = Set(Dictionary(grouping: names.values, by: { $0 }).filter { $0.value.count > 1 }.keys)
        return names.reduce(into: [:]) { result, pair in
            result[pair.key] = (
                pair.value, shared.contains(pair.value) ? "\(pair.value) (\(pair.key.prefix(7)))" : pair.value
            )
        }
    }

    static func validate(stream: String) throws {
        if let problem = Names.streamProblem(stream) { throw ValidationError(problem) }
    }

    struct Usage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Entries per day, by device or by a payload field.",
            discussion: """
                Prints one line per day and group with entries, oldest first. By device, a device shows by its name (with the start of its ID when two share a name). --json prints one object per line: day, group, count (and name, by device: group is then the device ID).

                Examples:
                  lansync report usage symbol_taps
                  lansync report usage symbol_taps --by caregiver_profile_id --days 30
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The stream.") var stream: String
        @Option(help: "Group by `device` (the writing device) or a payload FIELD.") var by = "device"
        @Option(help: "This many days, ending today (UTC).") var days = 14
        @Flag(help: "One JSON object per line.") var json = false

        func validate() throws {
            try Report.validate(stream: stream)
            guard (1...3_660).contains(days) else { throw ValidationError("--days must be 1 to 3660") }
            guard !by.isEmpty else { throw ValidationError("--by needs `device` or a payload field name") }
        }

        func run() async throws {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let node = try await reportingErrors { try global.openNode() }
            let entries = try await Report.entries(node, stream: stream, since: now - Int64(days + 1) * 86_400_000)
            let counts = UsageReports.usage(entries, by: by == "device" ? .device : .field(by), days: days, now: now)
            let names = by == "device" ? Report.deviceNames(node) : [:]
            let out = Output()
            if json {
                for count in counts {
                    var fields = [
                        ("day", ExportFile.quoted(count.day)), ("group", ExportFile.quoted(count.group)),
                        ("count", "\(count.count)"),
                    ]
                    if let name = names[count.group] { fields.insert(("name", ExportFile.quoted(name.plain)), at: 2) }
                    out.line(fields.jsonObject)
                }
                return
            }
            guard !counts.isEmpty else {
                note("no entries in \(stream) in the last \(days) day\(days == 1 ? "" : "s")")
                return
            }
            for line in aligned(
                [["DAY", by == "device" ? "DEVICE" : by.uppercased(), "ENTRIES"]]
                    + counts.map { [$0.day, names[$0.group]?.shown ?? $0.group, "\($0.count)"] }
            ) {
                out.line(line)
            }
        }
    }

    struct Sessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each session's start, end, duration, entries, distinct symbols and longest phrase.",
            discussion: """
                Entries are grouped by the payload field that names their session; entries without it are left out. Distinct symbols count the payloads' symbol_id values; the longest phrase is the greatest final_phrase_length, when payloads have one. --json prints one object per line: session, start, end (ISO 8601), duration_ms, entries, distinct_symbols, longest_phrase (null when none).

                Example:
                  lansync report sessions symbol_taps --session-field session_id
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The stream.") var stream: String
        @Option(help: "The payload field naming an entry's session.") var sessionField: String
        @Flag(help: "One JSON object per line.") var json = false

        func validate() throws { try Report.validate(stream: stream) }

        /// "25 min", or "42 s" under a minute.
        static func duration(_ milliseconds: Int64) -> String {
            milliseconds < 60_000 ? "\(milliseconds / 1000) s" : "\(milliseconds / 60_000) min"
        }

        func run() async throws {
            let sessions = UsageReports.sessions(
                try await Report.entries(global, stream: stream),
                sessionField: sessionField
            )
            let out = Output()
            if json {
                for session in sessions {
                    out.line(
                        [
                            ("session", ExportFile.quoted(session.id)),
                            ("start", ExportFile.quoted(Timestamps.iso8601(milliseconds: session.start))),
                            ("end", ExportFile.quoted(Timestamps.iso8601(milliseconds: session.end))),
                            ("duration_ms", "\(session.durationMilliseconds)"), ("entries", "\(session.entries)"),
                            ("distinct_symbols", "\(session.distinctSymbols)"),
                            ("longest_phrase", session.longestPhrase.map { "\($0)" } ?? "null"),
                        ].jsonObject
                    )
                }
                return
            }
            guard !sessions.isEmpty else {
                note("no entries in \(stream) have a \(sessionField) field")
                return
            }
            let rows = sessions.map { session in
                [
                    session.id, Timestamps.iso8601(milliseconds: session.start),
                    Timestamps.iso8601(milliseconds: session.end),
                    Self.duration(session.durationMilliseconds), "\(session.entries)", "\(session.distinctSymbols)",
                    session.longestPhrase.map { "\($0)" } ?? "-",
                ]
            }
            for line in aligned(
                [["SESSION", "START", "END", "DURATION", "ENTRIES", "SYMBOLS", "LONGEST PHRASE"]] + rows
            ) { out.line(line) }
        }
    }

    struct Regression: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Keys used often before and not at all lately: possible regressions.",
            discussion: """
                The recent window is the last --recent-days days (UTC, today included); the baseline is the --baseline-days days before it. A key is flagged when it was used at least --min-uses times in the baseline and never in the recent window. --json prints one object per line: key, last_used (ISO 8601), previous_frequency (uses in the baseline), per_day.

                Example:
                  lansync report regression symbol_taps --key symbol_id
                  lansync report regression symbol_taps --key symbol_id --baseline-days 28 --min-uses 10
                """
        )

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The stream.") var stream: String
        @Option(help: "The payload field to watch (e.g. symbol_id).") var key: String
        @Option(help: "Days of the baseline window.") var baselineDays = 14
        @Option(help: "Days of the recent window, ending today.") var recentDays = 5
        @Option(help: "Uses in the baseline that make a key worth flagging.") var minUses = 5
        @Flag(help: "One JSON object per line.") var json = false

        func validate() throws {
            try Report.validate(stream: stream)
            guard (1...3_660).contains(baselineDays), (1...3_660).contains(recentDays) else {
                throw ValidationError("--baseline-days and --recent-days must be 1 to 3660")
            }
            guard minUses >= 1 else { throw ValidationError("--min-uses must be at least 1") }
        }

        func run() async throws {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let flags = UsageReports.regressions(
                try await Report.entries(global, stream: stream),
                key: key,
                baselineDays: baselineDays,
                recentDays: recentDays,
                minUses: minUses,
                now: now
            )
            let out = Output()
            if json {
                for flag in flags {
                    out.line(
                        [
                            ("key", ExportFile.quoted(flag.key)),
                            ("last_used", ExportFile.quoted(Timestamps.iso8601(milliseconds: flag.lastUsed))),
                            ("previous_frequency", "\(flag.previousFrequency)"),
                            ("per_day", String(format: "%.2f", flag.previousUsesPerDay)),
                        ].jsonObject
                    )
                }
                return
            }
            guard !flags.isEmpty else {
                note(
                    "no regressions: no \(key) used \(minUses) or more times in the \(baselineDays) days before the last "
                        + "\(recentDays) went unused since"
                )
                return
            }
            let rows = flags.map {
                [
                    $0.key, Timestamps.iso8601(milliseconds: $0.lastUsed), "\($0.previousFrequency)",
                    String(format: "%.1f", $0.previousUsesPerDay),
                ]
            }
            for line in aligned([[key.uppercased(), "LAST USED", "USES BEFORE", "PER DAY"]] + rows) { out.line(line) }
        }
    }
}
