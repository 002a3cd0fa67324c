import Foundation

/// A replica in a directory that cannot be written: how it is recognised and opened, and what
/// a write is told there.
enum ReadOnlyReplica {
    /// Whether the directory holding `path` is on a read-only file system, or not writable by
    /// this process: SQLite cannot make the WAL's index or a journal there.
    static func directoryIsReadOnly(_ path: String) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        var info = statvfs()
        if statvfs(directory.isEmpty ? "." : directory, &info) == 0, info.f_flag & UInt(ST_RDONLY) != 0 { return true }
        return access(directory.isEmpty ? "." : directory, W_OK) != 0
    }

    /// The file as SQLite reads it read-only without a WAL index: `immutable=1`.
    static func uri(_ path: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#%")
        return "file:" + (path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path) + "?immutable=1"
    }

    /// What to tell someone reading the replica at `path` read-only, or nil: a `-wal` file beside
    /// it holds changes a read-only open cannot see.
    static func note(_ path: String) -> String? {
        let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        guard size > 0 else { return nil }
        return
            "the data directory is read-only and \((path as NSString).lastPathComponent)-wal holds \(size) bytes of changes "
            + "that cannot be applied here, so what is shown may be older than the replica; open it where it can be written "
            + "(or stop its agent cleanly before copying it) to see them"
    }

    /// What a write is told on a replica opened read-only.
    static let writeRefusal =
        "the replica cannot be written here: its data directory is read-only (a read-only file system, or no "
        + "write permission); reading works: status, log list, query, export"
}
