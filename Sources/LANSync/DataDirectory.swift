import Foundation

/// Where a node keeps its files, and the rule for finding it.
///
/// Layout: `identity.json` (device ID and key pair, mode 0600) and `replica.sqlite` (with its
/// `-wal` and `-shm` files) in a directory of mode 0700. A node in several groups keeps each
/// further group in `groups/NAME/`, a data directory of its own that shares the node's identity
/// (see `NodeGroups`).
public struct DataDirectory: Sendable, Equatable {
    /// The directory, as an absolute path.
    public let path: String
    /// The node's identity: in this directory, or for a further group in the node's.
    package let identityPath: String

    /// The data directory at `path` (made absolute; nothing is created until `LANSyncNode.initialize`).
    public init(path: String) {
        // Keep paths absolute so messages name the real place and a later chdir changes nothing.
        self.path = URL(fileURLWithPath: path).standardizedFileURL.path
        identityPath = self.path + "/identity.json"
    }

    /// The directory of a further group of the node in `node`, named `name`.
    init(group name: String, of node: DataDirectory) {
        path = node.path + "/groups/" + name
        identityPath = node.identityPath
    }
    package var replicaPath: String { path + "/replica.sqlite" }
    /// The node's own data directory: where its identity is (this one, for the node's first group).
    package var node: DataDirectory { DataDirectory(path: (identityPath as NSString).deletingLastPathComponent) }

    /// `$LANSYNC_DATA_DIR`, else `$XDG_DATA_HOME/lansync`, else `~/.local/share/lansync`.
    public static func resolve(explicit: String?, environment: [String: String]) -> DataDirectory {
        if let explicit, !explicit.isEmpty { return DataDirectory(path: explicit) }
        if let fromEnvironment = environment["LANSYNC_DATA_DIR"], !fromEnvironment.isEmpty {
            return DataDirectory(path: fromEnvironment)
        }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return DataDirectory(path: xdg + "/lansync") }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return DataDirectory(path: home + "/.local/share/lansync")
    }
}
