import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes and reads small files that hold secrets (the identity file, the group file, the peer list).
///
/// Written atomically with owner-only permissions from the first byte: the data goes to a
/// temporary file created with mode 0600, is fsynced, then renamed over the target and the
/// directory fsynced. A crash leaves either the old file or the new one, never half of one, and
/// no other user can ever read it.
package enum SecretFile {
    /// Numbers the temporary files of this process's writes.
    private static let temporaryNumbers = Atomic<UInt64>(0)

    package struct Failure: Error, CustomStringConvertible {
        package let path: String
        package let operation: String
        package let code: Int32

        package var description: String {
            "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        }
    }

    /// Replaces the file at `path` with `bytes`, mode 0600.
    ///
    /// Each call writes a temporary file of its own (`O_EXCL`): two writers of one file in one
    /// process (two sessions handing this device a new epoch at once) shared one name before,
    /// and one truncated the other's file under it, so a reader could find the target empty.
    package static func write(_ bytes: [UInt8], to path: String) throws(Failure) {
        let temporary = path + ".tmp-\(getpid())-\(temporaryNumbers.add(1, ordering: .relaxed).newValue)"
        var fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd < 0, errno == EEXIST {
            // Left by a crash of an earlier process with this PID: no live writer owns the name.
            unlink(temporary)
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        }
        guard fd >= 0 else { throw Failure(path: temporary, operation: "create", code: errno) }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                Glibc.write(fd, buffer.baseAddress! + written, buffer.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                let code = errno
                close(fd)
                unlink(temporary)
                throw Failure(path: temporary, operation: "write", code: code)
            }
            written += result
        }
        guard fsync(fd) == 0 else {
            let code = errno
            close(fd)
            unlink(temporary)
            throw Failure(path: temporary, operation: "sync", code: code)
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw Failure(path: path, operation: "replace", code: code)
        }
        syncDirectory(containing: path)
    }

    /// The file's bytes, or nil when it does not exist.
    package static func read(_ path: String) throws(Failure) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw Failure(path: path, operation: "open", code: errno)
        }
        defer { close(fd) }
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(path: path, operation: "read", code: errno)
            }
            if count == 0 { return out }
            out.append(contentsOf: chunk[0..<count])
        }
    }

    /// The permission bits of a file, or nil when it does not exist.
    package static func permissions(of path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt32(info.st_mode) & 0o777
    }

    /// Makes `path` a directory readable by its owner only, creating it and its parents as needed.
    package static func makePrivateDirectory(_ path: String) throws(Failure) {
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            partial += "/" + component
            if mkdir(partial, 0o700) != 0 && errno != EEXIST {
                throw Failure(path: partial, operation: "create directory", code: errno)
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw Failure(path: path, operation: "use as a directory", code: ENOTDIR)
        }
    }

    static func syncDirectory(containing path: String) {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let fd = open(
            directory.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : directory,
            O_RDONLY | O_DIRECTORY | O_CLOEXEC
        )
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
    }
}
