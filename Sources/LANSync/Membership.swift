import Foundation
import LANSyncCore

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
        if let left = try leftGroup() {
            throw LANSyncError(
                .invalidInput,
                "this data directory keeps the data of \(left.description), which this device left; it must not go to a "
                    + "new group. `lansync group leave --erase` deletes it from this machine first, or "
                    + "`lansync group create --name NAME` starts the new group beside it (nothing changed)"
            )
        }
        let group = GroupSecret.generate()
        try save(group)
        return group
    }

    /// The group this data directory's replica was in before the device left it, while it is in
    /// none; nil when it is in a group or never was. A replica holds one group's data for good:
    /// another group's join or create is refused in its place (`docs/groups.md`), so that nothing
    /// of a family the device left reaches the next one.
    package func leftGroup() throws(LANSyncError) -> LeftGroup? {
        guard try group() == nil else { return nil }
        return try LeftGroup.read(in: dataDirectory)
    }

    var leftGroupPath: String { LeftGroup.path(in: dataDirectory) }

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
        } else if let left = try leftGroup(), !left.tags.contains(group.tag), !replacing {
            throw LANSyncError(
                .invalidInput,
                "this data directory keeps the data of \(left.description), which this device left; it must not reach "
                    + "another group. `lansync group leave --erase` deletes it from this machine first, or "
                    + "`lansync group join CODE --name NAME` joins beside it; if this is that same group under a new "
                    + "key (a member was removed since), add --replace to join it again with its data (nothing changed)"
            )
        }
        try save(group)
        try? FileManager.default.removeItem(atPath: leftGroupPath)
        return true
    }

    /// Writes this device's "left" record (`lansync/left/DEVICE`), for its members to see once a
    /// running agent hands it on; `leaveGroup()` then drops the secret. Throws outside a group.
    /// Returns what a member must take before then (`LeaveHandover`, judged by `leaveTaken`).
    package func announceLeaving() async throws(LANSyncError) -> LeaveHandover {
        guard try group() != nil else {
            throw LANSyncError(.invalidInput, "this device is in no group; there is nothing to leave")
        }
        let record = LeftRecord(left: true, name: identity.name, at: nowText)
        try await writeRecords([(MemberKeys.left(deviceID.description), Self.json(record))])
        do {
            let held = try store.versionVector()
            return LeaveHandover(replica: replicaID, recordCounter: held[replicaID], held: held)
        } catch {
            throw Self.translate(error)
        }
    }

    /// How much of `handover` each member took, given its device ID (nil: not known yet) and
    /// the version vector it announced. This device's records say which members leave too, or
    /// were removed, which keeps them from counting as holding everything; they and this
    /// device's latest counter are read once for all the members.
    package func leaveTaken(
        _ handover: LeaveHandover,
        by members: [(device: String?, vector: VersionVector)]
    ) throws(LANSyncError) -> [LeaveHandover.Taken] {
        let notPresent = Set(try self.members().filter { !$0.isPresent }.map { $0.deviceID.lowercased() })
        let ownCounter = try ownCounter()
        return members.map { member in
            handover.taken(
                by: member.vector,
                ownCounter: ownCounter,
                memberLeaves: member.device.map { notPresent.contains($0.lowercased()) } ?? false
            )
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

    /// Leaves the group: the node keeps its data but syncs with nobody until it joins again. It
    /// remembers the group's tags (of the epochs it knew) beside the data, so that only that
    /// group may be joined in this place again (`leftGroup()`).
    public func leaveGroup() throws(LANSyncError) {
        if let epochs = try groupEpochs() {
            let left = LeftGroup(
                tags: [epochs.current.tag] + epochs.previous.map(\.group.tag),
                leftAt: Timestamps.iso8601(milliseconds: Int64(clock.now()))
            )
            do {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                try SecretFile.write(Array(try encoder.encode(left)), to: leftGroupPath)
            } catch {
                throw LANSyncError(.storage, "could not record the group left: \(error)")
            }
        }
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

/// What a data directory remembers of the group its replica was in, once the device left it
/// (`left-group.json`): the group's tags over the epochs the device knew (keyed hashes of the
/// secrets, which reveal nothing of them), and when it left.
package struct LeftGroup: Codable, Sendable, Equatable, CustomStringConvertible {
    package var format = "lansync-left-group"
    package var tags: [String]
    package var leftAt: String?

    package init(tags: [String], leftAt: String?) {
        self.tags = tags
        self.leftAt = leftAt
    }

    enum CodingKeys: String, CodingKey {
        case format, tags
        case leftAt = "left_at"
    }

    static func path(in directory: DataDirectory) -> String { directory.path + "/left-group.json" }

    /// The group left in `directory`, from its file alone (no replica opened); nil without one.
    static func read(in directory: DataDirectory) throws(LANSyncError) -> LeftGroup? {
        let path = path(in: directory)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let left = try? JSONDecoder().decode(LeftGroup.self, from: data) else {
            throw LANSyncError(
                .unusableData,
                "\(path) is damaged; `lansync group leave --erase` deletes the left group's data with it"
            )
        }
        return left
    }

    package var description: String {
        "group " + (tags.first ?? "(tag unknown)") + (leftAt.map { " (left \($0))" } ?? "")
    }
}
