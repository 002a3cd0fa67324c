import Foundation
package import LANSync

/// The secret every request to the local API carries (`Authorization: Bearer …` or `X-API-Key`),
/// kept in the data directory, readable by its owner only, like Syncthing's API key: a program
/// that can read it could read the replica file itself, and no other program can call the API.
package struct APIToken: Sendable {
    package static let fileName = "api-token"
    /// The node's own token, in the node's data directory: it opens every group the node serves
    /// (`/v1/groups/{group}/…`, and a dashboard link that shows them all), where a group's
    /// `api-token` opens that group only.
    package static let nodeFileName = "node-api-token"

    package let value: String

    package init(value: String) { self.value = value }

    /// The token of `directory`, made on first use: 32 random bytes as 64 hex digits, in a file
    /// created with mode 0600 (an existing file readable by others is narrowed to 0600).
    package static func loadOrCreate(
        in directory: DataDirectory,
        fileName: String = fileName
    ) throws(LANSyncError) -> APIToken {
        let path = directory.path + "/" + fileName
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard value.utf8.count >= 32, value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw LANSyncError(
                    .unusableData,
                    "\(path) does not hold an API token; delete it and start the agent again to make a new one"
                )
            }
            chmod(path, 0o600)
            return APIToken(value: value)
        }
        var generator = SystemRandomNumberGenerator()
        let value = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            // Another process made it first: use theirs.
            if errno == EEXIST { return try loadOrCreate(in: directory, fileName: fileName) }
            throw LANSyncError(
                .storage,
                "cannot create \(path): \(String(cString: strerror(errno))); check the data directory's permissions"
            )
        }
        defer { close(descriptor) }
        let bytes = Array((value + "\n").utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count, fsync(descriptor) == 0 else {
            unlink(path)
            throw LANSyncError(.storage, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return APIToken(value: value)
    }

    /// Whether `candidate` is the token, in time that does not depend on where they differ.
    package func matches(_ candidate: some StringProtocol) -> Bool {
        let expected = Array(value.utf8)
        let given = Array(candidate.utf8)
        var difference = UInt8(expected.count == given.count ? 0 : 1)
        for index in expected.indices { difference |= expected[index] ^ (index < given.count ? given[index] : 0) }
        return difference == 0
    }
}
