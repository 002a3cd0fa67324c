import Foundation

/// ISO 8601 UTC times with milliseconds ("2026-11-21T05:23:40.123Z"): how times are shown and exported.
package enum Timestamps {
    /// Formats with integer arithmetic only (days-from-civil in reverse), so the text is exact to
    /// the millisecond — a Double round trip through `Date` can print .888 for ...889 — and fast
    /// enough for listings of millions of entries.
    package static func iso8601(milliseconds: Int64) -> String {
        let (seconds, millis) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (daysRaw, secondOfDayRaw) = seconds.quotientAndRemainder(dividingBy: 86_400)
        // Floor division for times before 1970.
        let shift: Int64 = (secondOfDayRaw < 0 || (secondOfDayRaw == 0 && millis < 0)) ? 1 : 0
        let days = daysRaw - shift
        var secondOfDay = secondOfDayRaw + shift * 86_400
        var milli = millis
        if milli < 0 {
            milli += 1000
            secondOfDay -= 1
        }
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(milli, 3))Z"
    }

    /// Parses ISO 8601 with or without fractional seconds, or a plain date (taken as UTC midnight).
    package static func milliseconds(iso8601 text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return Int64((date.timeIntervalSince1970 * 1000).rounded())
        }
        if let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle()) {
            return Int64((date.timeIntervalSince1970 * 1000).rounded())
        }
        if let date = try? Date(trimmed, strategy: Date.ISO8601FormatStyle().year().month().day()) {
            return Int64((date.timeIntervalSince1970 * 1000).rounded())
        }
        return nil
    }

    /// Milliseconds since the epoch now.
    package static func nowMilliseconds() -> UInt64 {
        UInt64(Date().timeIntervalSince1970 * 1000)
    }
}
