import ArgumentParser
import Foundation
import LANSync

/// Buffered standard output: large listings go out in 64 KiB writes, not one syscall a line.
final class Output {
    private var buffer = [UInt8]()
    private let handle: FileHandle

    init(handle: FileHandle = .standardOutput) {
        self.handle = handle
        buffer.reserveCapacity(64 * 1024)
    }

    func write(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 64 * 1024 { flush() }
    }

    func line(_ text: String = "") { write(text + "\n") }

    func flush() {
        guard !buffer.isEmpty else { return }
        handle.write(Data(buffer))
        buffer.removeAll(keepingCapacity: true)
    }

    deinit { flush() }
}

/// Writes to standard error: messages for people that must not mix with data on stdout.
func note(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Runs a command body, turning LANSync errors into a one-line message on stderr and exit code 1.
func reportingErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as LANSyncError {
        note("lansync: error: \(error.message)")
        throw ExitCode(1)
    }
}

extension Array where Element == (String, String) {
    /// Members already encoded as JSON values, as one compact JSON object.
    var jsonObject: String { ExportFile.object(self) }
}

/// Lines up `rows` in columns separated by two spaces.
func aligned(_ rows: [[String]]) -> [String] {
    guard let width = rows.map(\.count).max() else { return [] }
    var widths = [Int](repeating: 0, count: width)
    for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
    return rows.map { row in
        row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
        }.joined(separator: "  ")
    }
}

/// "1 entry", "2 entries": a count with its noun, singular or plural.
func counted(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
}
