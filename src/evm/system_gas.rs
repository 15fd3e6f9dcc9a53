//! [`SystemGasEvm`]: alloy-evm's `EthEvm` for block execution, but for the gas of its system
//! calls, which execution-specs gives exactly `SYSTEM_TRANSACTION_GAS` before Amsterdam.
//!
//! Written here because no crate does it: revm 43 gives every system call (EIP-2935, 4788,
//! 7002, 7251) 31,566,720 gas of execution at every fork (30,000,000 plus the state gas of 16
//! new slots, its Amsterdam budget), so a request contract that needs 30,000,001 completes where
//! execution-specs runs out of gas and invalidates the block (the consensus suite's
//! `system_contract_out_of_gas` tests). alloy-evm's `EthEvm` hands the call to revm and keeps
//! no way to lower it; this type runs the same handler with execution-specs' limit. From
//! Amsterdam on revm's budget is used as it is.

use alloy_evm::eth::EthEvmContext;
use alloy_evm::precompiles::PrecompilesMap;
use alloy_evm::{Evm, EvmEnv};
use revm::context::{BlockEnv, CfgEnv, ContextSetters, Evm as RevmEvm, TxEnv};
use revm::context_interface::result::{EVMError, HaltReason, ResultAndState};
use revm::handler::instructions::EthInstructions;
use revm::handler::{EthFrame, Handler, MainnetHandler, SystemCallTx};
use revm::inspector::NoOpInspector;
use revm::interpreter::interpreter::EthInterpreter;
use revm::primitives::hardfork::SpecId;
use revm::primitives::{Address, Bytes};
use revm::{Context, ExecuteEvm};

/// execution-specs' `SYSTEM_TRANSACTION_GAS`: the gas of a system call before Amsterdam.
pub(crate) const SYSTEM_TRANSACTION_GAS: u64 = 30_000_000;

/// The revm EVM alloy-evm's `EthEvmFactory` builds without an inspector.
type Inner<DB> = RevmEvm<
    EthEvmContext<DB>,
    NoOpInspector,
    EthInstructions<EthInterpreter, EthEvmContext<DB>>,
    PrecompilesMap,
    EthFrame,
>;

/// alloy-evm's `EthEvm` without an inspector (block import), whose system calls get
/// [`SYSTEM_TRANSACTION_GAS`] before Amsterdam. Everything else passes through unchanged.
pub(crate) struct SystemGasEvm<DB: alloy_evm::Database>(pub(crate) Inner<DB>);

impl<DB: alloy_evm::Database> std::fmt::Debug for SystemGasEvm<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemGasEvm").field("spec", &self.0.ctx.cfg.spec).finish()
    }
}

impl<DB: alloy_evm::Database> Evm for SystemGasEvm<DB> {
    type DB = DB;
    type Tx = TxEnv;
    type Error = EVMError<DB::Error>;
    type HaltReason = HaltReason;
    type Spec = SpecId;
    type BlockEnv = BlockEnv;
    type Precompiles = PrecompilesMap;
    type Inspector = NoOpInspector;

    fn block(&self) -> &BlockEnv {
        &self.0.ctx.block
    }

    fn cfg_env(&self) -> &CfgEnv<SpecId> {
        &self.0.ctx.cfg
    }

    fn chain_id(&self) -> u64 {
        self.0.ctx.cfg.chain_id
    }

    fn transact_raw(&mut self, tx: TxEnv) -> Result<ResultAndState<HaltReason>, Self::Error> {
        self.0.transact(tx)
    }

    fn transact_system_call(
        &mut self,
        caller: Address,
        contract: Address,
        data: Bytes,
    ) -> Result<ResultAndState<HaltReason>, Self::Error> {
        let mut tx = TxEnv::new_system_tx_with_caller(caller, contract, data);
        if !self.0.ctx.cfg.spec.is_enabled_in(SpecId::AMSTERDAM) {
            tx.gas_limit = SYSTEM_TRANSACTION_GAS;
        }
        self.0.set_tx(tx);
        let mut handler: MainnetHandler<_, Self::Error, EthFrame> = MainnetHandler::default();
        let result = handler.run_system_call(&mut self.0)?;
        let state = self.0.finalize();
        Ok(ResultAndState::new(result, state))
    }

    fn finish(self) -> (DB, EvmEnv<SpecId, BlockEnv>) {
        let Context { block, cfg, journaled_state, .. } = self.0.ctx;
        (journaled_state.database, EvmEnv { block_env: block, cfg_env: cfg })
    }

    fn set_inspector_enabled(&mut self, _: bool) {}

    fn components(&self) -> (&DB, &NoOpInspector, &PrecompilesMap) {
        (&self.0.ctx.journaled_state.database, &self.0.inspector, &self.0.precompiles)
    }

    fn components_mut(&mut self) -> (&mut DB, &mut NoOpInspector, &mut PrecompilesMap) {
        (&mut self.0.ctx.journaled_state.database, &mut self.0.inspector, &mut self.0.precompiles)
    }
}
