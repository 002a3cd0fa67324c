import Foundation
import Synchronization
import Testing

@testable import LANSync

/// The caregivers' reports, against the usage-logging document's own tests (seeds/002_…).
@Suite struct UsageReportsTests {
    static let dayMilliseconds: Int64 = 86_400_000
    /// Day 1 of the scenarios: 2026-11-01, 00:00 UTC.
    static let day1: Int64 = 1_793_491_200_000
    static let home = DeviceID(bytes: [UInt8](repeating: 1, count: 16))!
    static let therapy = DeviceID(bytes: [UInt8](repeating: 2, count: 16))!

    static func at(day: Int, hour: Int = 10, minute: Int = 0) -> Int64 {
        day1 + Int64(day - 1) * dayMilliseconds + Int64(hour) * 3_600_000 + Int64(minute) * 60_000
    }

    /// Distinct dots and ids for the entries one test makes.
    static let counter = Mutex<UInt64>(0)

    static func tap(
        _ symbol: String,
        at time: Int64,
        device: DeviceID = home,
        session: String = "s1",
        extra: String = ""
    ) -> Entry {
        let counter = Self.counter.withLock { value in
            value += 1
            return value
        }
        return Entry(
            id: "tap-\(counter)",
            stream: "symbol_taps",
            originDevice: device,
            dot: Dot(replica: ReplicaID(high: 1, low: 1), counter: counter),
            hlc: HybridTimestamp(physicalMilliseconds: UInt64(time), logical: 0),
            wallMilliseconds: time,
            payload: #"{"symbol_id":"\#(symbol)","session_id":"\#(session)"\#(extra)}"#
        )
    }

    /// TEST: regression_detection_flags — GIVEN "help" was used 15 times in days 1-10 AND "help"
    /// was used 0 times in days 11-16 WHEN regression detection runs on day 16 THEN "help" is
    /// flagged as potential regression AND flag includes last_used_date and previous_frequency.
    @Test func regressionDetectionFlags() {
        var entries = [Entry]()
        // "help": 15 uses spread over days 1–10, the last on day 10 at 18:00.
        for use in 0..<15 { entries.append(Self.tap("help", at: Self.at(day: 1 + use * 9 / 14, hour: 8 + use % 10))) }
        // "want" is used every day, days 1–16: never flagged.
        for day in 1...16 { entries.append(Self.tap("want", at: Self.at(day: day))) }
        // "juice": twice in the baseline only, under the minimum of uses: not flagged.
        entries.append(Self.tap("juice", at: Self.at(day: 3)))
        entries.append(Self.tap("juice", at: Self.at(day: 4)))
        let flags = UsageReports.regressions(entries, key: "symbol_id", now: Self.at(day: 16, hour: 20))
        #expect(flags.map(\.key) == ["help"])
        let help = flags.first
        #expect(help?.previousFrequency == 15)
        #expect(help?.lastUsed == entries.filter { $0.payload.contains("help") }.map(\.wallMilliseconds).max())
        #expect(help.map { UsageReports.dayText($0.lastUsed) } == "2026-11-10")
        // Used once more on day 12 (inside the recent window): no longer a regression.
        entries.append(Self.tap("help", at: Self.at(day: 12)))
        #expect(UsageReports.regressions(entries, key: "symbol_id", now: Self.at(day: 16, hour: 20)).isEmpty)
    }

    @Test func usageCountsPerDayByDeviceAndByField() {
        let entries = [
            Self.tap("help", at: Self.at(day: 1), device: Self.home),
            Self.tap("want", at: Self.at(day: 1, hour: 11), device: Self.home),
            Self.tap("want", at: Self.at(day: 2), device: Self.therapy),
            Self.tap("want", at: Self.at(day: 9), device: Self.therapy),
        ]
        let byDevice = UsageReports.usage(entries, by: .device, days: 2, now: Self.at(day: 2, hour: 23))
        #expect(
            byDevice == [
                .init(day: "2026-11-01", group: Self.home.description, count: 2),
                .init(day: "2026-11-02", group: Self.therapy.description, count: 1),
            ]
        )
        let bySymbol = UsageReports.usage(entries, by: .field("symbol_id"), days: 9, now: Self.at(day: 9))
        #expect(
            bySymbol.map { "\($0.day) \($0.group) \($0.count)" } == [
                "2026-11-01 help 1", "2026-11-01 want 1", "2026-11-02 want 1", "2026-11-09 want 1",
            ]
        )
        // An entry without the field is counted under "(none)".
        let other = UsageReports.usage(entries, by: .field("caregiver"), days: 1, now: Self.at(day: 1))
        #expect(other == [.init(day: "2026-11-01", group: "(none)", count: 2)])
    }

    @Test func sessionsSummarizeTheirEntries() {
        let entries = [
            Self.tap("help", at: Self.at(day: 1, minute: 0), session: "morning"),
            Self.tap("want", at: Self.at(day: 1, minute: 5), session: "morning"),
            Self.tap("want", at: Self.at(day: 1, minute: 25), session: "morning", extra: #","final_phrase_length":3"#),
            Self.tap(
                "more",
                at: Self.at(day: 2),
                session: "evening",
                extra: #","location":"clinic","caregiver":"dad""#
            ),
            Self.tap(
                "help",
                at: Self.at(day: 2, minute: 3),
                device: Self.therapy,
                session: "evening",
                extra: #","location":"clinic","caregiver":"therapist""#
            ),
        ]
        let sessions = UsageReports.sessions(
            entries,
            sessionField: "session_id",
            details: ["location", "caregiver", "mood"]
        )
        #expect(sessions.map(\.id) == ["morning", "evening"])
        #expect(sessions[0].entries == 3)
        #expect(sessions[0].distinctSymbols == 2)
        #expect(sessions[0].durationMilliseconds == 25 * 60_000)
        #expect(sessions[0].longestPhrase == 3)
        #expect(sessions[1].longestPhrase == nil)
        // Where and with whom each session happened, for the caregiver's view.
        #expect(sessions[0].devices == [Self.home.description])
        #expect(sessions[0].details.isEmpty)
        #expect(Set(sessions[1].devices) == [Self.home.description, Self.therapy.description])
        #expect(sessions[1].details == ["location": ["clinic"], "caregiver": ["dad", "therapist"]])
    }

    @Test func fieldValuesAreReadStrictly() {
        let entry = Entry(
            id: "x",
            stream: "s",
            originDevice: Self.home,
            dot: Dot(replica: ReplicaID(high: 1, low: 1), counter: 1),
            hlc: .zero,
            wallMilliseconds: 0,
            payload: #"{"a":1,"b":true,"c":1.5,"d":[1,2],"e":null,"f":"x"}"#
        )
        #expect(UsageReports.fieldText(entry, "a") == "1")
        #expect(UsageReports.fieldText(entry, "b") == "true")
        #expect(UsageReports.fieldText(entry, "c") == "1.5")
        #expect(UsageReports.fieldText(entry, "d") == "[1,2]")
        #expect(UsageReports.fieldText(entry, "e") == nil)
        #expect(UsageReports.fieldText(entry, "f") == "x")
        #expect(UsageReports.fieldText(entry, "missing") == nil)
    }
}
