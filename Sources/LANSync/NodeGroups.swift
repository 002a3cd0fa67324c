import Foundation
import LANSyncIdentity

/// One group of a node: its local name and where its replica and files are.
public struct NodeGroup: Sendable, Equatable {
    /// A label for people on this machine ("family-a"), sent to nobody.
    public let name: String
    /// The group's data directory: the node's own for its first group, `groups/NAME/` for others.
    public let directory: DataDirectory
    /// The group's tag, as `lansync group show` prints it.
    public let tag: String
}

/// The groups of a node (see docs/groups.md): an app opens one group's replica with
/// `LANSyncNode.open(at: NodeGroups.select("family-a", in: directory))`, or lists them.
///
/// The first group lives in the node's data directory, as a
/// node of one group always has; each further one in `groups/NAME/`, a data directory of its own
/// with its own replica, secret and peers, sharing the node's identity. A node's data directory
/// from before several groups is thus a node of one group, upgraded with nothing moved. The first
/// group's name is kept in `groups.json` (`default` until one is given).
public enum NodeGroups {
    /// The first group's name until one is given.
    public static let defaultFirstName = "default"

    /// The node's groups, the first one first, then by name. A group left (its directory kept,
    /// its secret gone) is not listed.
    public static func list(in node: DataDirectory) throws(LANSyncError) -> [NodeGroup] {
        var groups = [NodeGroup]()
        if let tag = try tag(of: node) {
            groups.append(NodeGroup(name: try firstName(of: node), directory: node, tag: tag))
        }
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: node.path + "/groups")) ?? []).sorted()
        for name in names where nameProblem(name) == nil {
            let directory = DataDirectory(group: name, of: node)
            if let tag = try tag(of: directory) { groups.append(NodeGroup(name: name, directory: directory, tag: tag)) }
        }
        return groups
    }

    /// The data directory a command works on: the group `selector` names (by name or tag), or
    /// with none named the node's only group (its own directory while it is in none). Refuses,
    /// listing the groups, when the node is in several and none is named, or none matches.
    public static func select(_ selector: String?, in node: DataDirectory) throws(LANSyncError) -> DataDirectory {
        try group(selectedBy: selector, in: node)?.directory ?? node
    }

    /// The group `select` picks, or nil when none is named and the node is in none.
    package static func group(
        selectedBy selector: String?,
        in node: DataDirectory
    ) throws(LANSyncError)
        -> NodeGroup?
    {
        let groups = try list(in: node)
        guard let selector else {
            guard groups.count > 1 else { return groups.first }
            throw LANSyncError(
                .invalidInput,
                "this node is in \(groups.count) groups; name one with --group NAME (or its tag): \(describe(groups))"
            )
        }
        let wanted = selector.lowercased()
        if let group = groups.first(where: { $0.name == wanted || $0.tag == wanted }) { return group }
        throw LANSyncError(
            .invalidInput,
            groups.isEmpty
                ? "this node is in no group, so none is named \(selector); `lansync group create` or `group join CODE` first"
                : "this node has no group named \(selector); its groups: \(describe(groups))"
        )
    }

    /// Where a group created or joined now goes (`placeForNewGroup`), and whether the command made
    /// its directory (so that a failed create or join can take it away again).
    package struct NewGroupPlace: Sendable {
        package let directory: DataDirectory
        package let isNew: Bool

        package init(directory: DataDirectory, isNew: Bool) {
            self.directory = directory
            self.isNew = isNew
        }
    }

    /// Where a group created or joined now goes: the node's own directory while it is in no group
    /// (`name`, if given, becomes the first group's name), else `groups/NAME/`, which `name` must
    /// then give. The directory is made, with an empty replica, when there is none (a group left
    /// there earlier keeps its replica, and is joined again with it).
    package static func placeForNewGroup(
        named name: String?,
        in node: DataDirectory
    ) throws(LANSyncError) -> NewGroupPlace {
        if let name, let problem = nameProblem(name) { throw LANSyncError(.invalidInput, problem) }
        let groups = try list(in: node)
        if let name, let taken = groups.first(where: { $0.name == name }) {
            throw LANSyncError(
                .invalidInput,
                "this node has a group named \(name) already (tag \(taken.tag)); choose another --name"
            )
        }
        guard FileManager.default.fileExists(atPath: node.identityPath) else {
            throw LANSyncError(
                .notInitialized,
                "no LANSync node in \(node.path); run `lansync init` first (or point --data-dir elsewhere)"
            )
        }
        // The node's own directory holds its first group, or one it left whose data is kept there.
        let leftHere = groups.contains(where: { $0.directory == node }) ? nil : try leftGroup(selectedBy: nil, in: node)
        guard groups.contains(where: { $0.directory == node }) || leftHere != nil else {
            if let name { try setFirstName(name, of: node) }
            return NewGroupPlace(directory: node, isNew: false)
        }
        if let leftHere, name == nil || name == leftHere.name {
            throw LANSyncError(
                .invalidInput,
                "this node keeps the data of \(leftHere.name) (tag \(leftHere.tag)), a group it left: add --name NAME "
                    + "(another name) to start or join a group beside it, or delete that data first with "
                    + "`lansync group leave --erase` (nothing changed)"
            )
        }
        guard let name else {
            throw LANSyncError(
                .invalidInput,
                "this node is in a group already (\(describe(groups))): add --name NAME to join or start another "
                    + "beside it (a label for this machine only, such as family-b)"
            )
        }
        let directory = DataDirectory(group: name, of: node)
        let isNew = !FileManager.default.fileExists(atPath: directory.path)
        _ = try LANSyncNode.initialize(at: directory, name: nil)
        return NewGroupPlace(directory: directory, isNew: isNew)
    }

    /// The node's group that `joinCode` names, if it is in it (a node joins a group once).
    package static func group(joinCode: String, in node: DataDirectory) throws(LANSyncError) -> NodeGroup? {
        guard case .success(let group) = GroupSecret.parse(joinCode: joinCode) else { return nil }
        return try list(in: node).first { $0.tag == group.tag }
    }

    /// The name of the group whose data directory is `directory` (`groups/NAME/`, or a node's own
    /// directory and so its first group).
    package static func name(of directory: DataDirectory) -> String {
        // A further group's directory keeps the node's identity, not one of its own.
        guard directory.identityPath == directory.path + "/identity.json" else {
            return String(directory.path.split(separator: "/").last ?? "")
        }
        return (try? firstName(of: directory)) ?? defaultFirstName
    }

    /// Why `code` is not a join code (mistyped, say), or nil.
    package static func joinCodeProblem(_ code: String) -> String? {
        if case .failure(let problem) = GroupSecret.parse(joinCode: code) { return problem.description }
        return nil
    }

    /// Why `name` cannot name a group, or nil: 1–32 lowercase letters, digits and dashes,
    /// starting with a letter or digit.
    package static func nameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        let allowed = bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
        guard (1...32).contains(bytes.count), allowed, bytes[0] != 0x2D else {
            return "a group's name is 1–32 lowercase letters, digits and dashes, starting with a letter or digit "
                + "(such as family-a); got \(name.debugDescription)"
        }
        return nil
    }

    /// The group this node left at the place `selector` names (a further group's name, or the
    /// first group's), or with none named in the node's own directory while the node is in no
    /// group: its data is still here (`lansync group leave --erase` deletes it). Nil when there is
    /// none.
    package static func leftGroup(
        selectedBy selector: String?,
        in node: DataDirectory
    ) throws(LANSyncError)
        -> NodeGroup?
    {
        let name: String
        let directory: DataDirectory
        if let selector {
            name = selector.lowercased()
            if name == (try firstName(of: node)) {
                directory = node
            } else if nameProblem(name) == nil, FileManager.default.fileExists(atPath: node.path + "/groups/" + name) {
                directory = DataDirectory(group: name, of: node)
            } else {
                return nil
            }
        } else {
            guard try list(in: node).isEmpty else { return nil }
            (name, directory) = (try firstName(of: node), node)
        }
        // Read from its file: deciding where a group goes opens no replica.
        guard try tag(of: directory) == nil, let left = try LeftGroup.read(in: directory) else { return nil }
        return NodeGroup(name: name, directory: directory, tag: left.tags.first ?? "unknown")
    }

    /// Removes `group`'s files from this machine and returns their paths: for a further group its
    /// directory; for the first group its replica, secret and peer list (the node keeps its
    /// identity and gets an empty replica, as after `lansync init`). Only a group already left.
    /// Waits up to `seconds` for an agent serving the group to stop (`ServingLock`), and refuses
    /// while one still does.
    package static func erase(
        _ group: NodeGroup,
        of node: DataDirectory,
        waiting seconds: Double = 0
    ) async throws(LANSyncError) -> [String] {
        guard let lock = await ServingLock.exclusive(group.directory, waiting: seconds) else {
            throw LANSyncError(
                .invalidInput,
                "an agent still serves this group (`lansync run`, or an app's own); stop it, then erase again"
            )
        }
        defer { withExtendedLifetime(lock) {} }
        let manager = FileManager.default
        do {
            if group.directory.path != node.path {
                try manager.removeItem(atPath: group.directory.path)
                return [group.directory.path]
            }
            var erased = [String]()
            let files = (try? manager.contentsOfDirectory(atPath: node.path)) ?? []
            for file in files.sorted() where erasedWithFirstGroup(file) {
                try manager.removeItem(atPath: node.path + "/" + file)
                erased.append(node.path + "/" + file)
            }
            try? manager.removeItem(atPath: node.path + "/groups.json")
            _ = try LANSyncNode.initialize(at: node, name: nil)
            return erased
        } catch let error as LANSyncError {
            throw error
        } catch {
            throw LANSyncError(.storage, "could not erase the group's files: \(error)")
        }
    }

    /// The first group's files in the node's directory: its replica, secret, peer list and API
    /// token (a token must not open whatever group comes there next). Not the identity, the
    /// further groups or the running agent's sockets.
    private static func erasedWithFirstGroup(_ file: String) -> Bool {
        file.hasPrefix("replica.sqlite") || ["group.json", "left-group.json", "peers.json", "api-token"].contains(file)
    }

    static func describe(_ groups: [NodeGroup]) -> String {
        groups.map { "\($0.name) (tag \($0.tag))" }.joined(separator: ", ")
    }

    private static func tag(of directory: DataDirectory) throws(LANSyncError) -> String? {
        do {
            return try GroupFile(path: directory.path + "/group.json").load()?.tag
        } catch {
            throw LANSyncError(.unusableData, error.description)
        }
    }

    private struct Catalog: Codable {
        var format = "lansync-groups"
        var version = 1
        var first: String
    }

    private static func firstName(of node: DataDirectory) throws(LANSyncError) -> String {
        guard let data = FileManager.default.contents(atPath: node.path + "/groups.json") else {
            return defaultFirstName
        }
        guard let catalog = try? JSONDecoder().decode(Catalog.self, from: data), nameProblem(catalog.first) == nil
        else {
            throw LANSyncError(
                .unusableData,
                "\(node.path)/groups.json is damaged; delete it to name the first group default"
            )
        }
        return catalog.first
    }

    private static func setFirstName(_ name: String, of node: DataDirectory) throws(LANSyncError) {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try SecretFile.write(Array(try encoder.encode(Catalog(first: name))), to: node.path + "/groups.json")
        } catch {
            throw LANSyncError(.storage, "could not name the group: \(error)")
        }
    }
}
