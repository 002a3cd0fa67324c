import Foundation

/// Group membership of a node: which group's devices it may sync with (see `GroupSecret`).
extension LANSyncNode {
    var groupFile: GroupFile { GroupFile(path: dataDirectory.path + "/group.json") }

    /// The group this node belongs to, or nil.
    package func group() throws(LANSyncError) -> GroupSecret? {
        do { return try groupFile.load() } catch { throw LANSyncError(.unusableData, error.description) }
    }

    /// Starts a new group with this node as its first member.
    package func createGroup() throws(LANSyncError) -> GroupSecret {
        if let current = try group() {
            throw LANSyncError(
                .invalidInput,
                "this device is already in group \(current.tag); `lansync group show --code` prints its join code "
                    + "for other devices, and `lansync group leave` comes first to start another group"
            )
        }
        let group = GroupSecret.generate()
        try save(group)
        return group
    }

    /// Joins the group a join code names. Returns false when this node was in that group already.
    /// Moving to another group needs `replacing`, so a slip cannot cut a device off its group.
    @discardableResult
    public func joinGroup(code: String, replacing: Bool = false) throws(LANSyncError) -> Bool {
        let group: GroupSecret
        switch GroupSecret.parse(joinCode: code) {
        case .success(let parsed): group = parsed
        case .failure(let problem): throw LANSyncError(.invalidInput, problem.description)
        }
        if let current = try self.group() {
            if current.tag == group.tag && current.secret.constantTimeEquals(group.secret) { return false }
            guard replacing else {
                throw LANSyncError(
                    .invalidInput,
                    "this device is in group \(current.tag); to move it to group \(group.tag) run the command again "
                        + "with --replace (it will stop syncing with its current group)"
                )
            }
        }
        try save(group)
        return true
    }

    /// Leaves the group: the node keeps its data but syncs with nobody until it joins again.
    public func leaveGroup() throws(LANSyncError) {
        do { try groupFile.remove() } catch { throw LANSyncError(.storage, error.description) }
    }

    private func save(_ group: GroupSecret) throws(LANSyncError) {
        do {
            try groupFile.save(group, joined: Timestamps.iso8601(milliseconds: Int64(clock.now())))
        } catch {
            throw LANSyncError(.storage, error.description)
        }
    }
}
