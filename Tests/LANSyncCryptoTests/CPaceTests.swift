import LANSyncCrypto
import Testing

/// CPace over ristretto255 and SHA-512, against the known answers of draft-irtf-cfrg-cpace
/// ("Test vector for CPace using group ristretto255 and hash SHA-512"), then as two parties.
@Suite struct CPaceTests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    static let prs = Array("Password".utf8)
    static let channel = bytes("0b415f696e69746961746f720b425f726573706f6e646572")
    static let session = bytes("7e4b4791d6a8ef019b936c79fb7f2c57")
    static let ya = bytes("da3d23700a9e5699258aef94dc060dfda5ebb61f02a5ea77fad53f4ff0976d08")
    static let yb = bytes("d2316b454718c35362d83d69df6320f38578ed5984651435e2949762d900b80d")
    static let expectedYa = bytes("d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0eec482b9157")
    static let expectedYb = bytes("3ea7e0b19560d7c0b0f5734f63b955286dfa8232b5ebe63324e2d9e7433f7258")
    static let expectedK = bytes("80b69a8a76457ab6a4d7f887a4bf6b55a2f80ac19c333f917a05fc9887c8b40f")
    static let expectedISK = bytes(
        """
        b69effbf61b51d56401c0f65601abe428de8206feaaf0e32198896dcae7b35cd2b38950a39dfd5d4a79164614c2984f7daa460b588c1e80c3fa2068af7900447
        """
    )

    @Test func lengthPrefixesAreLEB128() {
        #expect(CPace.prependLength([]) == [0])
        #expect(CPace.prependLength(Array("1234".utf8)) == [4] + Array("1234".utf8))
        #expect(CPace.prependLength([UInt8](repeating: 1, count: 127)).prefix(1) == [0x7F])
        #expect(CPace.prependLength([UInt8](repeating: 1, count: 128)).prefix(2) == [0x80, 0x01])
    }

    @Test func theGeneratorMatchesTheDraft() {
        let string = CPace.generatorString(prs: Self.prs, channel: Self.channel, session: Self.session)
        #expect(string.count == 170)
        #expect(
            string
                == Self.bytes(
                    """
                    11435061636552697374726574746f3235350850617373776f726464
                    00000000000000000000000000000000000000000000000000000000
                    00000000000000000000000000000000000000000000000000000000
                    00000000000000000000000000000000000000000000000000000000
                    00000000000000000000000000000000180b415f696e69746961746f
                    720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f
                    2c57
                    """
                )
        )
        #expect(
            SHA512.hash(string)
                == Self.bytes(
                    """
                    da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288b6663af06bf645c93cd1c51512307199c80e84908916d983b34af77205f90851a657ee27
                    """
                )
        )
        #expect(
            CPace.generator(prs: Self.prs, channel: Self.channel, session: Self.session)
                == Self.bytes("222b6b195fe84b1652badb6f6a3ae3d24341e7306967f0b8115b40d5698c7e56")
        )
    }

    @Test func messagesSecretAndSessionKeyMatchTheDraft() throws {
        let a = try CPaceParty(
            role: .initiator,
            code: Self.prs,
            channel: Self.channel,
            session: Self.session,
            associatedData: Array("ADa".utf8),
            scalar: SecureBytes(copying: Self.ya)
        )
        let b = try CPaceParty(
            role: .responder,
            code: Self.prs,
            channel: Self.channel,
            session: Self.session,
            associatedData: Array("ADb".utf8),
            scalar: SecureBytes(copying: Self.yb)
        )
        #expect(a.element == Self.expectedYa)
        #expect(b.element == Self.expectedYb)
        #expect(try CPace.multiply(SecureBytes(copying: Self.ya), b.element) == Self.expectedK)
        #expect(try CPace.multiply(SecureBytes(copying: Self.yb), a.element) == Self.expectedK)
        let transcript = CPace.transcript(
            initiator: (a.element, Array("ADa".utf8)),
            responder: (b.element, Array("ADb".utf8))
        )
        #expect(transcript.count == 74)
        let keyA = try a.sessionKey(peerElement: b.element, peerData: Array("ADb".utf8))
        let keyB = try b.sessionKey(peerElement: a.element, peerData: Array("ADa".utf8))
        #expect(keyA.withUnsafeBytes { Array($0) } == Self.expectedISK)
        #expect(keyB.withUnsafeBytes { Array($0) } == Self.expectedISK)
    }

    /// Fresh scalars: the same code gives both sides one key; another code, another key.
    @Test func partiesAgreeOnlyWhenTheirCodesMatch() throws {
        let session = SHA512.hash(Array("pairing".utf8)).prefix(16).map { $0 }
        func run(_ codeA: String, _ codeB: String) throws -> Bool {
            let a = try CPaceParty(
                role: .initiator,
                code: Array(codeA.utf8),
                channel: [],
                session: session,
                associatedData: [1]
            )
            let b = try CPaceParty(
                role: .responder,
                code: Array(codeB.utf8),
                channel: [],
                session: session,
                associatedData: [2]
            )
            let keyA = try a.sessionKey(peerElement: b.element, peerData: [2]).withUnsafeBytes { Array($0) }
            let keyB = try b.sessionKey(peerElement: a.element, peerData: [1]).withUnsafeBytes { Array($0) }
            return keyA == keyB
        }
        #expect(try run("48213907", "48213907"))
        #expect(try !run("48213907", "48213908"))
    }

    /// Elements that are not group elements, or that force the identity, are refused.
    @Test func badPeerElementsAreRefused() throws {
        let party = try CPaceParty(role: .initiator, code: [1, 2, 3], channel: [], session: [9], associatedData: [])
        for bad in [
            [UInt8](repeating: 0, count: 32), [UInt8](repeating: 0xFF, count: 32), [UInt8](repeating: 1, count: 31),
        ] {
            #expect(throws: CryptoError.self) { try party.sessionKey(peerElement: bad, peerData: []) }
        }
    }
}
