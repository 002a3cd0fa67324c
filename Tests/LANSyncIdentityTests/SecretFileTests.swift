import Foundation
import LANSyncIdentity
import Testing

@Suite struct SecretFileTests {
    /// Two sessions of one agent can write the group file at once (two members hand it a new
    /// epoch together). Every write must succeed and a reader must only ever see a whole file.
    @Test func concurrentWritersOfOneFileNeverLeaveItPartOrFail() async throws {
        let directory = NSTemporaryDirectory() + "lansync-secret-file-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/group.json"
        // Contents of different lengths, so a file one writer truncated under another shows.
        let contents = (0..<8).map { writer in [UInt8](repeating: UInt8(65 + writer), count: 4096 * (writer + 1)) }
        try SecretFile.write(contents[0], to: path)
        let failures = try await withThrowingTaskGroup(of: [String].self) { tasks in
            for writer in contents.indices {
                tasks.addTask {
                    var failed: [String] = []
                    for _ in 0..<40 {
                        do { try SecretFile.write(contents[writer], to: path) } catch { failed.append("\(error)") }
                    }
                    return failed
                }
            }
            tasks.addTask {
                var torn: [String] = []
                for _ in 0..<400 {
                    let read = try SecretFile.read(path) ?? []
                    if !contents.contains(read) { torn.append("read \(read.count) bytes that no writer wrote whole") }
                }
                return torn
            }
            return try await tasks.reduce(into: []) { $0 += $1 }
        }
        let firstFailures = failures.prefix(3)
        #expect(failures.count == 0, "\(firstFailures)")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(left == ["group.json"], "no temporary file is left behind: \(left)")
        #expect(SecretFile.permissions(of: path) == 0o600)
    }
}
