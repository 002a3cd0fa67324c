import Foundation

/// A stacked bar chart as SVG, drawn on the server: one bar per day, one colour per group
/// (device or payload value). Each bar segment carries its day, group and count as data
/// attributes and a tooltip, so people read it by hovering and tests read it from the DOM.
struct StackedBarChart {
    let title: String
    /// Every day shown, oldest first ("2026-11-22"), including days without entries.
    let days: [String]
    let counts: [(day: String, group: String, count: Int)]

    static let palette = [
        "#3b6ea5", "#e07b39", "#4f9d69", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd",
    ]

    /// Groups by their total, largest first: the stacking order and the colours (past the
    /// palette, the last colour repeats).
    var groups: [String] {
        var totals: [String: Int] = [:]
        for count in counts { totals[count.group, default: 0] += count.count }
        return totals.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map(\.key)
    }

    var svg: String {
        let width = 480.0
        let height = 220.0
        let left = 34.0
        let bottom = 26.0
        let top = 12.0
        var byDay: [String: [(group: String, count: Int)]] = [:]
        for count in counts { byDay[count.day, default: []].append((count.group, count.count)) }
        let maximum = max(1, days.map { day in byDay[day, default: []].reduce(0) { $0 + $1.count } }.max() ?? 1)
        let step = (width - left) / Double(max(days.count, 1))
        let barWidth = max(2, step * 0.75)
        let scale = (height - top - bottom) / Double(maximum)
        var parts = [String]()
        // Axis: the maximum and zero.
        parts.append("<text x=\"\(left - 6)\" y=\"\(top + 4)\" text-anchor=\"end\" font-size=\"12\">\(maximum)</text>")
        parts.append("<text x=\"\(left - 6)\" y=\"\(height - bottom)\" text-anchor=\"end\" font-size=\"12\">0</text>")
        parts.append(
            "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width)\" y2=\"\(height - bottom)\" stroke=\"#9aa3ad\"/>"
        )
        let order = groups
        let rank = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
        func color(_ group: String) -> String { Self.palette[min(rank[group] ?? 0, Self.palette.count - 1)] }
        for (index, day) in days.enumerated() {
            let x = left + Double(index) * step + (step - barWidth) / 2
            var y = height - bottom
            for (group, count) in byDay[day, default: []].sorted(by: { rank[$0.group] ?? 0 < rank[$1.group] ?? 0 }) {
                let barHeight = Double(count) * scale
                y -= barHeight
                parts.append(
                    "<rect class=\"bar\" x=\"\(fmt(x))\" y=\"\(fmt(y))\" width=\"\(fmt(barWidth))\" height=\"\(fmt(barHeight))\" fill=\"\(color(group))\" "
                        + "data-day=\"\(HTML.escape(day))\" data-group=\"\(HTML.escape(group))\" data-count=\"\(count)\">"
                        + "<title>\(HTML.escape(day)) · \(HTML.escape(group)): \(count)</title></rect>"
                )
            }
            // A date under every bar when few, else under every seventh counting back from today.
            if days.count <= 8 || (days.count - 1 - index) % 7 == 0 {
                parts.append(
                    "<text x=\"\(fmt(x + barWidth / 2))\" y=\"\(height - 10)\" text-anchor=\"middle\" font-size=\"12\">\(HTML.escape(String(day.dropFirst(5))))</text>"
                )
            }
        }
        let legend = order.map { "<span style=\"--c:\(color($0))\">\(HTML.escape($0))</span>" }.joined(separator: " ")
        return """
            <figure class="chart" data-title="\(HTML.escape(title))"><figcaption><h2>\(HTML.escape(title))</h2></figcaption>
            <svg viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="\(HTML.escape(title))">\(parts.joined())</svg>
            <div class="legend">\(legend.isEmpty ? "no entries in these days" : legend)</div></figure>
            """
    }

    private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
}
