import Foundation
import Testing

@testable import LANSync

/// Where a node's groups live and which one a command means (`NodeGroups`), on disk.
@Suite struct NodeGroupsTests {
    /// A group's directory made for a create or join is new (a failed command takes it away); one
    /// that was there already, a group left with its data kept, is not, and keeps its replica.
    /// Names come from the directory's place, not from its path's spelling.
    @Test func aNewGroupsPlaceSaysWhetherTheCommandMadeIt() throws {
        let root = DataDirectory(path: NSTemporaryDirectory() + "lansync-groups-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: root.path) }
        _ = try LANSyncNode.initialize(at: root, name: "room", machineIDPath: "/nonexistent")
        let first = try NodeGroups.placeForNewGroup(named: "family-a", in: root)
        #expect(first.directory == root && !first.isNew, "the first group lives in the node's directory")
        _ = try LANSyncNode.open(at: root).createGroup()

        let fresh = try NodeGroups.placeForNewGroup(named: "family-b", in: root)
        #expect(fresh.isNew && fresh.directory.path == root.path + "/groups/family-b")
        let nodeB = try LANSyncNode.open(at: fresh.directory)
        _ = try nodeB.createGroup()
        let replicaB = nodeB.replicaID
        try nodeB.leaveGroup()
        let again = try NodeGroups.placeForNewGroup(named: "family-b", in: root)
        #expect(!again.isNew, "a directory a left group kept is not the command's to remove")
        #expect(try LANSyncNode.open(at: again.directory).replicaID == replicaB)

        #expect(NodeGroups.name(of: root) == "family-a")
        #expect(NodeGroups.name(of: again.directory) == "family-b")
        let lookalike = DataDirectory(path: root.path + "/groups/family-b")
        #expect(
            NodeGroups.name(of: lookalike) == NodeGroups.defaultFirstName,
            "a node's own directory, whatever its path"
        )
        #expect(try NodeGroups.group(selectedBy: nil, in: root)?.name == "family-a")
        #expect(throws: LANSyncError.self) { try NodeGroups.group(selectedBy: "family-b", in: root) }
    }
}
