// SPDX-License-Identifier: MIT
// Contracts of loupe's dev-chain sample history. Compiled by `contracts/build.sh` (solc from
// npm, pinned); the bytecode it prints is committed in `src/dev/contracts.rs`.
pragma solidity 0.8.28;

/// A minimal ERC-20-style token.
contract Token {
    mapping(address => uint256) public balanceOf;
    uint256 public totalSupply;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(uint256 supply) {
        balanceOf[msg.sender] = supply;
        totalSupply = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "insufficient balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

/// Library-style code run by DELEGATECALL: writes slot 0 of the caller.
contract Stamp {
    uint256 public stamped;

    function stamp(uint256 v) external {
        stamped = v;
    }
}

/// Calls other contracts with CALL, STATICCALL and DELEGATECALL, and can revert.
contract Prober {
    uint256 public stamped; // slot 0, written through Stamp by DELEGATECALL
    uint256 public lastBalance;

    function probe(Token token, Stamp stamp, address who) external returns (uint256) {
        // CALL
        (bool ok, bytes memory out) = address(token).call(abi.encodeWithSignature("balanceOf(address)", who));
        require(ok, "call failed");
        uint256 viaCall = abi.decode(out, (uint256));
        // STATICCALL
        (ok, out) = address(token).staticcall(abi.encodeWithSignature("balanceOf(address)", who));
        require(ok, "staticcall failed");
        require(abi.decode(out, (uint256)) == viaCall, "mismatch");
        // DELEGATECALL: Stamp's code writes this contract's slot 0
        (ok,) = address(stamp).delegatecall(abi.encodeWithSignature("stamp(uint256)", viaCall));
        require(ok, "delegatecall failed");
        lastBalance = viaCall;
        return viaCall;
    }

    function fail() external pure {
        revert("prober says no");
    }
}

/// Created and destroyed in one transaction (EIP-6780 still deletes it): sends its value back.
contract Ephemeral {
    constructor() payable {
        selfdestruct(payable(msg.sender));
    }
}
