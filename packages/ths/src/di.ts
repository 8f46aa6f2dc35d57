// reflect-metadata MUST be evaluated before tsyringe (tsyringe throws at import time otherwise).
import "reflect-metadata";

export { container, type DependencyContainer, inject, injectable } from "tsyringe";
