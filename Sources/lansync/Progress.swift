import Foundation

/// Progress of long work on standard error: a bar with rate and ETA redrawn in place on a
/// terminal, plain periodic lines otherwise (logs, pipes). Quiet for work that ends quickly.
final class ProgressReporter {
    private let label: String
    private let unit: String
    private let isTerminal: Bool
    private let started = Date()
    private var lastShown: Date?
    private var shownOnTerminal = false
    /// Seconds before the first report and between plain lines (LANSYNC_PROGRESS_INTERVAL_MS
    /// changes it, for tests).
    private let interval: Double
    private let delay: Double

    init(label: String, unit: String) {
        self.label = label
        self.unit = unit
        isTerminal = isatty(STDERR_FILENO) != 0 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
        let override = ProcessInfo.processInfo.environment["LANSYNC_PROGRESS_INTERVAL_MS"].flatMap(Double.init).map {
            $0 / 1000
        }
        interval = override ?? (isTerminal ? 0.1 : 2)
        delay = override ?? (isTerminal ? 0.5 : 2)
    }

    /// Reports `done` of `total` (nil when unknown); `fraction` overrides done/total for the ETA.
    func update(done: Int, total: Int?, fraction: Double? = nil) {
        let now = Date()
        let elapsed = now.timeIntervalSince(started)
        guard elapsed >= delay, now.timeIntervalSince(lastShown ?? .distantPast) >= interval else { return }
        lastShown = now
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let part = fraction ?? total.map { $0 > 0 ? min(1, Double(done) / Double($0)) : 1 }
        let eta = part.flatMap { $0 > 0.01 && $0 < 1 ? elapsed * (1 - $0) / $0 : nil }
        let amount = total.map { "\(done.grouped) of \($0.grouped) \(unit)" } ?? "\(done.grouped) \(unit)"
        let speed = "\(Int(rate).grouped)/s"
        let left = eta.map { ", about \(Self.duration($0)) left" } ?? ""
        if isTerminal {
            let bar =
                part.map { fraction -> String in
                    let filled = Int(fraction * 24)
                    return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 24 - filled)
                        + "] "
                        + String(format: "%3d%% ", Int(fraction * 100))
                } ?? ""
            write("\r\u{1B}[2K\(label)  \(bar)\(amount)  \(speed)\(eta.map { "  ETA \(Self.duration($0))" } ?? "")")
            shownOnTerminal = true
        } else {
            let percent = part.map { " (\(Int($0 * 100))%)" } ?? ""
            write("\(label): \(amount)\(percent), \(speed)\(left)\n")
        }
    }

    /// Ends the bar (a newline on a terminal, so what follows starts on its own line).
    func finish() {
        if shownOnTerminal { write("\n") }
        shownOnTerminal = false
    }

    private func write(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

    static func duration(_ seconds: Double) -> String {
        seconds < 60 ? "\(Int(seconds.rounded(.up))) s" : "\(Int(seconds / 60)) min \(Int(seconds) % 60) s"
    }
}

extension Int {
    /// 12,300: digits grouped by thousands.
    var grouped: String {
        let digits = String(self.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return (self < 0 ? "-" : "") + out
    }
}
