import Foundation
import Synchronization

/// Every goal a run measured, as data: with `--json FILE`, written one JSON object per line when
/// the run ends, for `scripts/performance-table`, which turns them into the table of
/// docs/performance.md. The printed lines stay what people read.
enum GoalRecord {
    private static let records = Mutex<[[String: String]]>([])

    /// Records one goal: what was measured (`name`), the figure as printed (`figure`, a median and
    /// its range where there are rounds), the goal as printed, and whether it was met.
    static func record(_ name: String, figure: String, goal: String, met: Bool) {
        records.withLock { $0.append(["name": name, "figure": figure, "goal": goal, "met": met ? "met" : "missed"]) }
    }

    /// Writes the records to the file `--json` names, if it names one.
    static func writeIfAsked() throws {
        let arguments = CommandLine.arguments
        guard let index = arguments.firstIndex(of: "--json"), index + 1 < arguments.count else { return }
        let lines = try records.withLock { records in
            try records.map {
                String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self)
            }
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: arguments[index + 1],
            atomically: true,
            encoding: .utf8
        )
    }
}
