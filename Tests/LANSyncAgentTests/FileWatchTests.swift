import Foundation
import LANSync
import Testing

@testable import LANSyncAgent

/// The agent learns of other processes writing its replica through inotify (no polling): a
/// write in the watched directory wakes the watcher with the file's name, and `stop` ends it.
@Suite struct FileWatchTests {
    @Test func aWriteInTheDirectoryIsReportedByNameAndStopEndsTheWatch() throws {
        let directory = NSTemporaryDirectory() + "lansync-watch-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let watch = try #require(FileWatch.directory(directory))
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory + "/replica.sqlite-wal"))
        let names = watch.waitForChanges()
        #expect(names?.contains("replica.sqlite-wal") == true, "\(String(describing: names))")
        watch.stop()
        #expect(watch.waitForChanges() == nil)
    }

    /// `struct inotify_event` records as the kernel writes them: names NUL-padded to their length.
    @Test func eventNamesAreReadFromTheKernelsLayout() {
        func event(_ name: String, padded length: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: 12)
            bytes += [UInt8(length), 0, 0, 0]
            bytes += Array(name.utf8) + [UInt8](repeating: 0, count: length - name.utf8.count)
            return bytes
        }
        let buffer = event("replica.sqlite-wal", padded: 32) + event("peers.json", padded: 16) + event("", padded: 0)
        #expect(FileWatch.names(in: buffer[...]) == ["replica.sqlite-wal", "peers.json"])
    }
}
