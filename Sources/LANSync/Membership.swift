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

    /// Writes this device's "left" record (`lansync/left/DEVICE`), for its members to see once a
    /// running agent hands it on; `leaveGroup()` then drops the secret. Throws outside a group.
    /// Returns this replica's ID and counter after the write: a member whose version vector
    /// reaches that counter holds the record.
    package func announceLeaving() async throws(LANSyncError) -> (replica: String, counter: UInt64) {
        guard try group() != nil else {
            throw LANSyncError(.invalidInput, "this device is in no group; there is nothing to leave")
        }
        let record = LeftRecord(left: true, name: identity.name, at: nowText)
        try await writeRecords([(MemberKeys.left(deviceID.description), Self.json(record))])
        do {
            return (replicaID.description, try store.versionVector().counters[replicaID] ?? 0)
        } catch {
            throw Self.translate(error)
        }
    }

    /// After joining a group this device had left, tells its members it is back (its "left"
    /// record, which only it can write, says so). Does nothing otherwise, nor while it is still
    /// leaving (joined before it said it left). The agent calls it on start.
    package func announceReturnIfLeft() async throws(LANSyncError) {
        guard try group() != nil, let value = try preference(MemberKeys.left(deviceID.description)),
            let record = try? JSONDecoder().decode(LeftRecord.self, from: Data(value.utf8)), record.left,
            let joined = groupFile.joined(), joined > record.at
        else { return }
        let back = LeftRecord(left: false, name: identity.name, at: nowText)
        try await writeRecords([(MemberKeys.left(deviceID.description), Self.json(back))])
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
