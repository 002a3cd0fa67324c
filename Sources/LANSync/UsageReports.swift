import Foundation
package import LANSyncCore

/// What caregivers ask of a stream's entries: how much it was used per day, what each session
/// held, and which keys (symbols, phrases) fell out of use. One implementation for the CLI (and,
/// later, the local API and the dashboard). Days are UTC calendar days; a payload field's value
/// counts as its text (strings as they are, numbers and the rest as compact JSON).
package enum UsageReports {
    /// Entries of one UTC day for one group (a device, or a payload field's value).
    package struct DayCount: Equatable, Sendable {
        /// "2026-11-22".
        package let day: String
        package let group: String
        package let count: Int
    }

    /// How `usage` groups a day's entries.
    package enum Grouping: Equatable, Sendable {
        /// By the device that wrote the entry.
        case device
        /// By a payload field's value ("(none)" when an entry lacks it).
        case field(String)
    }

    /// Counts per UTC day and group, over the `days` days ending with the day of `now`
    /// (today included), oldest first; days without entries are left out.
    package static func usage(_ entries: [Entry], by grouping: Grouping, days: Int, now: Int64) -> [DayCount] {
        let first = firstDay(ofLast: days, now: now)
        var counts: [String: [String: Int]] = [:]
        for entry in entries
        where entry.wallMilliseconds >= first && entry.wallMilliseconds < dayStart(now) + dayMilliseconds {
            let group: String
            switch grouping {
            case .device: group = entry.originDevice.description
            case .field(let name): group = fieldText(entry, name) ?? "(none)"
            }
            counts[dayText(entry.wallMilliseconds), default: [:]][group, default: 0] += 1
        }
        return counts.keys.sorted().flatMap { day in
            counts[day]!.sorted { $0.key < $1.key }.map { DayCount(day: day, group: $0.key, count: $0.value) }
        }
    }

    /// One session's summary.
    package struct Session: Equatable, Sendable {
        package let id: String
        /// Milliseconds since the epoch of its first and last entry.
        package let start: Int64
        package let end: Int64
        package let entries: Int
        /// Distinct values of the payloads' `symbol_id` (0 when no payload has one).
        package let distinctSymbols: Int
        /// The greatest `final_phrase_length` among its payloads, when any has one.
        package let longestPhrase: Int?
        /// The devices its entries were written on, by ID.
        package var devices: [String] = []
        /// Distinct values, in order, of the payload fields asked for (where it happened, who was
        /// present: `location`, `caregiver`); a field no entry has is left out.
        package var details: [String: [String]] = [:]

        package var durationMilliseconds: Int64 { end - start }
    }

    /// The entries grouped by a payload field naming their session, oldest session first;
    /// entries without the field are left out.
    package static func sessions(_ entries: [Entry], sessionField: String, details fields: [String] = []) -> [Session] {
        var bySession: [String: [Entry]] = [:]
        for entry in entries {
            guard let id = fieldText(entry, sessionField) else { continue }
            bySession[id, default: []].append(entry)
        }
        return bySession.map { id, entries in
            let times = entries.map(\.wallMilliseconds)
            let payloads = entries.map(Payload.init)
            let symbols = Set(payloads.compactMap { $0.text("symbol_id") })
            let phrases = payloads.compactMap { $0.text("final_phrase_length").flatMap { Int($0) } }
            var session = Session(
                id: id,
                start: times.min()!,
                end: times.max()!,
                entries: entries.count,
                distinctSymbols: symbols.count,
                longestPhrase: phrases.max()
            )
            session.devices = Set(entries.map(\.originDevice.description)).sorted()
            for field in fields {
                let values = Set(payloads.compactMap { $0.text(field) }).sorted()
                if !values.isEmpty { session.details[field] = values }
            }
            return session
        }.sorted { ($0.start, $0.id) < ($1.start, $1.id) }
    }

    /// A key used often before and not at all lately: a possible regression.
    package struct RegressionFlag: Equatable, Sendable {
        package let key: String
        /// Milliseconds since the epoch of its last use.
        package let lastUsed: Int64
        /// Its uses in the baseline window.
        package let previousFrequency: Int
        /// Its uses per day in the baseline window.
        package var previousUsesPerDay: Double { Double(previousFrequency) / Double(baselineDays) }
        package let baselineDays: Int
    }

    /// Keys of a payload field used at least `minUses` times in the baseline window and never in
    /// the recent one. The recent window is the `recentDays` UTC days ending with the day of `now`;
    /// the baseline window the `baselineDays` days before it. On day 16 with the defaults (14 and
    /// 5), the recent window is days 12–16 and the baseline days −2 to 11: a symbol used 15 times
    /// in days 1–10 and never since is flagged, with its last use and its previous frequency, 15.
    package static func regressions(
        _ entries: [Entry],
        key field: String,
        baselineDays: Int = 14,
        recentDays: Int = 5,
        minUses: Int = 5,
        now: Int64
    ) -> [RegressionFlag] {
        let recentStart = firstDay(ofLast: recentDays, now: now)
        let baselineStart = firstDay(ofLast: baselineDays + recentDays, now: now)
        var baseline: [String: Int] = [:]
        var recent: Set<String> = []
        var lastUsed: [String: Int64] = [:]
        for entry in entries {
            guard let key = fieldText(entry, field) else { continue }
            lastUsed[key] = max(lastUsed[key] ?? .min, entry.wallMilliseconds)
            if entry.wallMilliseconds >= recentStart {
                recent.insert(key)
            } else if entry.wallMilliseconds >= baselineStart {
                baseline[key, default: 0] += 1
            }
        }
        return baseline.filter { $0.value >= minUses && !recent.contains($0.key) }
            .map {
                RegressionFlag(
                    key: $0.key,
                    lastUsed: lastUsed[$0.key]!,
                    previousFrequency: $0.value,
                    baselineDays: baselineDays
                )
            }
            .sorted { ($0.previousFrequency, $1.key) > ($1.previousFrequency, $0.key) }
    }

    // MARK: Days and fields

    static let dayMilliseconds: Int64 = 86_400_000

    /// The start of the UTC day holding `milliseconds`.
    /// The start of the first of the `days` UTC days ending with the day of `now`: the oldest
    /// entry a `days`-day report reads (`regressions` reads `baselineDays + recentDays`).
    package static func firstDay(ofLast days: Int, now: Int64) -> Int64 {
        dayStart(now) - Int64(days - 1) * dayMilliseconds
    }

    static func dayStart(_ milliseconds: Int64) -> Int64 {
        milliseconds - ((milliseconds % dayMilliseconds) + dayMilliseconds) % dayMilliseconds
    }

    /// "YYYY-MM-DD" of the UTC day holding `milliseconds`.
    package static func dayText(_ milliseconds: Int64) -> String {
        String(Timestamps.iso8601(milliseconds: milliseconds).prefix(10))
    }

    /// A top-level payload field's value as text; nil when the payload is not an object, lacks
    /// the field or holds null there.
    static func fieldText(_ entry: Entry, _ name: String) -> String? { Payload(entry).text(name) }

    /// An entry's payload, decoded once for every field asked of it. Decoded strictly
    /// (JSONDecoder never reads 1 as true).
    struct Payload {
        let entry: Entry
        private let fields: [String: FieldValue]?

        init(_ entry: Entry) {
            self.entry = entry
            fields = try? JSONDecoder().decode([String: FieldValue].self, from: Data(entry.payload.utf8))
        }

        func text(_ name: String) -> String? {
            guard let value = fields?[name] else { return nil }
            switch value {
            case .null: return nil
            case .text(let text): return text
            case .integer(let number): return "\(number)"
            case .real(let number): return "\(number)"
            case .bool(let flag): return flag ? "true" : "false"
            case .nested:
                // An array or object: its compact JSON text, keys sorted.
                guard let whole = try? JSONSerialization.jsonObject(with: Data(entry.payload.utf8)) as? [String: Any],
                    let nested = whole[name],
                    let data = try? JSONSerialization.data(withJSONObject: nested, options: [.sortedKeys])
                else { return nil }
                return String(decoding: data, as: UTF8.self)
            }
        }
    }

    private enum FieldValue: Decodable {
        case null, text(String), integer(Int64), real(Double), bool(Bool), nested

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let flag = try? container.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? container.decode(Int64.self) {
                self = .integer(number)
            } else if let number = try? container.decode(Double.self) {
                self = .real(number)
            } else if let text = try? container.decode(String.self) {
                self = .text(text)
            } else {
                self = .nested
            }
        }
    }
}
