import LANSyncCrypto
import LANSyncIdentity
import Testing

@Suite struct GroupSecretTests {
    @Test func joinCodeRoundTripsAndToleratesHowPeopleTypeIt() throws {
        let group = GroupSecret.generate()
        let code = group.joinCode
        #expect(code.split(separator: "-").map(\.count) == [7, 7, 7, 7, 7, 7, 7, 7])
        for typed in [
            code, code.uppercased(), code.replacingOccurrences(of: "-", with: " "),
            code.replacingOccurrences(of: "0", with: "O").replacingOccurrences(of: "1", with: "l"),
        ] {
            let parsed = try GroupSecret.parse(joinCode: typed).get()
            #expect(parsed.secret.constantTimeEquals(group.secret), "\(typed)")
        }
    }

    @Test func mistypedCodesAreRefused() {
        let code = Array(GroupSecret.generate().joinCode)
        var typo = code
        let index = 10
        typo[index] = typo[index] == "a" ? "b" : "a"
        #expect(throws: GroupSecret.JoinCodeProblem.checksumMismatch) {
            try GroupSecret.parse(joinCode: String(typo)).get()
        }
        #expect(throws: GroupSecret.JoinCodeProblem.wrongLength(55)) {
            try GroupSecret.parse(joinCode: String(code.dropLast())).get()
        }
        #expect(throws: GroupSecret.JoinCodeProblem.badCharacter("u")) {
            try GroupSecret.parse(joinCode: "u" + String(code.dropFirst())).get()
        }
    }

    @Test func tagAndPSKAreStableAndRevealNothing() {
        let group = GroupSecret.generate()
        let secretHex = group.secret.withUnsafeBytes { [UInt8]($0).hexString }
        let again = GroupSecret(secret: SecureBytes(copying: [UInt8](hexString: secretHex)!))
        #expect(group.tag == again.tag)
        #expect(group.tag.count == 16)
        #expect(!secretHex.contains(group.tag))
        #expect(group.noisePSK.constantTimeEquals(again.noisePSK))
        #expect(!group.noisePSK.constantTimeEquals(group.secret))
        #expect(GroupSecret.generate().tag != group.tag)
    }
}
